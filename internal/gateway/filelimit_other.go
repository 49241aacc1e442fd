//go:build !unix

package gateway

// fileLimit returns 0: there is no file limit to read (Windows has no
// RLIMIT_NOFILE), and the default connection cap is fallbackMaxConns.
func fileLimit() uint64 { return 0 }
