//go:build !unix

package bench

import "time"

// processCPU is not measured here; CPU per call reads 0.
func processCPU() time.Duration { return 0 }
