package identity_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

// BenchmarkSign is the cost of signing one identity assertion: claims to
// JSON, an ES256 signature, the compact serialization
// (docs/benchmarks.md).
func BenchmarkSign(b *testing.B) {
	clk := newClock()
	st := openSQLiteB(b)
	s := newSignerB(b, st, clk)
	c := personClaims
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Sign(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSignFloor is the ECDSA P-256 signature alone, over a payload's
// SHA-256: the floor Sign's JOSE work adds to.
func BenchmarkSignFloor(b *testing.B) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"iss":"https://gw.example.test","sub":"u-1"}`))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ecdsa.SignASN1(rand.Reader, key, sum[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkToken is what a call pays for its identity token at steady
// state: the caller's token, reused (docs/benchmarks.md).
func BenchmarkToken(b *testing.B) {
	clk := newClock()
	st := openSQLiteB(b)
	s := newSignerB(b, st, clk)
	c := personClaims
	if _, err := s.Token(c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Token(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
