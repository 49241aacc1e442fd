package main

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"testing"
	"time"
)

func TestDrawBars(t *testing.T) {
	var lines []string
	b, err := drawBars(context.Background(), []float64{3, -1, 4, 1, 5}, 0, func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Dx(); got != width {
		t.Errorf("width = %d", got)
	}
	if len(lines) != 5 || lines[4] != "drew bar 5 of 5" {
		t.Errorf("progress = %q", lines)
	}
}

func TestDrawBarsStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var lines []string
	_, err := drawBars(ctx, []float64{1, 2, 3, 4}, 20*time.Millisecond, func(s string) {
		lines = append(lines, s)
		cancel()
	})
	if !errors.Is(err, context.Canceled) || len(lines) != 1 {
		t.Errorf("err = %v after %d bars; want cancelled after the first", err, len(lines))
	}
}
