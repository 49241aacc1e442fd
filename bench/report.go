package bench

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Pair is one repetition of one shape: direct and gateway back to back,
// and the cached gateway when it is measured (Cached.Calls > 0).
type Pair struct {
	Config                  Config
	Rep                     int
	Direct, Gateway, Cached Result
}

// Summary is the medians of a shape over its repetitions, with each
// metric's spread (min and max) across them.
type Summary struct {
	Config Config
	Reps   int
	// [0] direct, [1] gateway, [2] cached gateway (zero when not measured).
	P50, P99 [3]Stat
	PerSec   [3]Stat
	CPU      [3]Stat // process CPU µs per call
}

// Cached says whether the cached gateway was measured.
func (s Summary) Cached() bool { return s.PerSec[2].Median > 0 }

// Stat is a median with its range.
type Stat struct{ Median, Min, Max float64 }

// Summarize groups pairs by shape, in the order of cfgs.
func Summarize(cfgs []Config, pairs []Pair) []Summary {
	var out []Summary
	for _, c := range cfgs {
		var p50, p99, ps, cpu [3][]float64
		for _, p := range pairs {
			if p.Config.Name != c.Name {
				continue
			}
			for i, r := range []Result{p.Direct, p.Gateway, p.Cached} {
				if r.Calls == 0 {
					continue
				}
				p50[i] = append(p50[i], micros(r.P50))
				p99[i] = append(p99[i], micros(r.P99))
				ps[i] = append(ps[i], r.PerSec())
				cpu[i] = append(cpu[i], micros(r.CPUPerCall()))
			}
		}
		if len(p50[0]) == 0 {
			continue
		}
		s := Summary{Config: c, Reps: len(p50[0])}
		for i := range 3 {
			if len(p50[i]) == 0 {
				continue
			}
			s.P50[i], s.P99[i], s.PerSec[i], s.CPU[i] = stat(p50[i]), stat(p99[i]), stat(ps[i]), stat(cpu[i])
		}
		out = append(out, s)
	}
	return out
}

func stat(xs []float64) Stat {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := len(xs)
	m := xs[n/2]
	if n%2 == 0 {
		m = (xs[n/2-1] + xs[n/2]) / 2
	}
	return Stat{Median: m, Min: xs[0], Max: xs[n-1]}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// WriteTable writes the medians as a markdown table, ratios gateway/direct
// computed from the medians, then the spread of every figure.
func WriteTable(w io.Writer, ss []Summary) {
	fmt.Fprintln(w, "| callers | p50 direct µs | p50 gateway µs | p50 × | p99 direct µs | p99 gateway µs | p99 × | calls/s direct | calls/s gateway | calls/s × | CPU µs/call direct | CPU µs/call gateway | CPU × |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, s := range ss {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n", s.Config.Name,
			s.P50[0].Median, s.P50[1].Median, s.P50[1].Median/s.P50[0].Median,
			s.P99[0].Median, s.P99[1].Median, s.P99[1].Median/s.P99[0].Median,
			s.PerSec[0].Median, s.PerSec[1].Median, s.PerSec[1].Median/s.PerSec[0].Median,
			s.CPU[0].Median, s.CPU[1].Median, s.CPU[1].Median/s.CPU[0].Median)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Spread over the repetitions (min–max):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| callers | reps | p50 direct µs | p50 gateway µs | p99 direct µs | p99 gateway µs | calls/s direct | calls/s gateway | CPU µs/call direct | CPU µs/call gateway |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, s := range ss {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Config.Name, s.Reps,
			span(s.P50[0]), span(s.P50[1]), span(s.P99[0]), span(s.P99[1]), span(s.PerSec[0]), span(s.PerSec[1]), span(s.CPU[0]), span(s.CPU[1]))
	}
}

// WriteCacheTable writes, for the shapes where the cached gateway was
// measured, the medians of all three targets with the ratio of cached to
// uncached gateway calls/s, then their spread.
func WriteCacheTable(w io.Writer, ss []Summary) {
	fmt.Fprintln(w, "| callers | calls/s direct | calls/s gateway | calls/s cached | cached/gateway calls/s × | p50 µs direct / gateway / cached | p99 µs direct / gateway / cached | CPU µs/call direct / gateway / cached |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, s := range ss {
		if !s.Cached() {
			continue
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %.2f | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f |\n", s.Config.Name,
			s.PerSec[0].Median, s.PerSec[1].Median, s.PerSec[2].Median, s.PerSec[2].Median/s.PerSec[1].Median,
			s.P50[0].Median, s.P50[1].Median, s.P50[2].Median,
			s.P99[0].Median, s.P99[1].Median, s.P99[2].Median,
			s.CPU[0].Median, s.CPU[1].Median, s.CPU[2].Median)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Spread over the repetitions (min–max):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| callers | reps | calls/s direct | calls/s gateway | calls/s cached | p50 µs cached | p99 µs cached | CPU µs/call cached |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, s := range ss {
		if !s.Cached() {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", s.Config.Name, s.Reps,
			span(s.PerSec[0]), span(s.PerSec[1]), span(s.PerSec[2]), span(s.P50[2]), span(s.P99[2]), span(s.CPU[2]))
	}
}

func span(s Stat) string { return fmt.Sprintf("%.0f–%.0f", s.Min, s.Max) }

// WritePair writes one repetition as a line, for the record.
func WritePair(w io.Writer, p Pair) {
	fmt.Fprintf(w, "rep %d %-12s direct p50 %6.0fµs p99 %7.0fµs %6.0f/s cpu %4.0fµs | gateway p50 %6.0fµs p99 %7.0fµs %6.0f/s cpu %4.0fµs | p50 ×%.2f calls/s ×%.2f\n",
		p.Rep, p.Config.Name,
		micros(p.Direct.P50), micros(p.Direct.P99), p.Direct.PerSec(), micros(p.Direct.CPUPerCall()),
		micros(p.Gateway.P50), micros(p.Gateway.P99), p.Gateway.PerSec(), micros(p.Gateway.CPUPerCall()),
		float64(p.Gateway.P50)/float64(p.Direct.P50), p.Gateway.PerSec()/p.Direct.PerSec())
	if p.Cached.Calls > 0 {
		fmt.Fprintf(w, "rep %d %-12s cached p50 %6.0fµs p99 %7.0fµs %6.0f/s cpu %4.0fµs | cached/gateway calls/s ×%.2f\n",
			p.Rep, p.Config.Name, micros(p.Cached.P50), micros(p.Cached.P99), p.Cached.PerSec(), micros(p.Cached.CPUPerCall()),
			p.Cached.PerSec()/p.Gateway.PerSec())
	}
}

// WriteSplit writes the legs of single-caller calls as a markdown table:
// for each leg the median over repetitions of the per-repetition medians,
// and the gateway's extra time.
func WriteSplit(w io.Writer, direct, gateway []Split) {
	leg := func(ss []Split, f func(Split) time.Duration) Stat {
		xs := make([]float64, len(ss))
		for i, s := range ss {
			xs[i] = micros(f(s))
		}
		return stat(xs)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "One caller, leg by leg (median µs of %d repetitions, min–max):\n\n", len(direct))
	fmt.Fprintln(w, "| leg | direct µs | gateway µs | gateway extra µs |")
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	for _, l := range []struct {
		name string
		f    func(Split) time.Duration
	}{
		{"client → handler start", func(s Split) time.Duration { return s.In }},
		{"handler", func(s Split) time.Duration { return s.Handler }},
		{"handler return → client", func(s Split) time.Duration { return s.Out }},
		{"sum", func(s Split) time.Duration { return s.In + s.Handler + s.Out }},
	} {
		d, g := leg(direct, l.f), leg(gateway, l.f)
		fmt.Fprintf(w, "| %s | %.0f (%s) | %.0f (%s) | %+.0f |\n", l.name, d.Median, span(d), g.Median, span(g), g.Median-d.Median)
	}
}
