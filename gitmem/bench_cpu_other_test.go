//go:build !unix

package gitmem

import "time"

// processCPU is not measured here: the benchmark reports no cpu-ns/op.
func processCPU() time.Duration { return 0 }
