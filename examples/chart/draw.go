package main

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"time"
)

const (
	width, height = 640, 360
	margin        = 20
)

// drawBars renders values as a bar chart PNG, one bar at a time, calling
// progress after each and giving up as soon as ctx ends.
func drawBars(ctx context.Context, values []float64, delay time.Duration, progress func(string)) ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fill(img, img.Bounds(), color.White)
	lo, hi := 0.0, 0.0
	for _, v := range values {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if hi == lo {
		hi = lo + 1
	}
	plotH := float64(height - 2*margin)
	zero := margin + int(plotH*hi/(hi-lo))
	slot := (width - 2*margin) / len(values)
	for i, v := range values {
		if delay > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("stopped after %d of %d bars: %w", i, len(values), ctx.Err())
			case <-time.After(delay):
			}
		} else if err := ctx.Err(); err != nil {
			return nil, err
		}
		h := int(plotH * math.Abs(v) / (hi - lo))
		x0 := margin + i*slot + slot/8
		x1 := margin + (i+1)*slot - slot/8
		r := image.Rect(x0, zero-h, x1, zero)
		if v < 0 {
			r = image.Rect(x0, zero, x1, zero+h)
		}
		fill(img, r, color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff})
		progress(fmt.Sprintf("drew bar %d of %d", i+1, len(values)))
	}
	fill(img, image.Rect(margin, zero, width-margin, zero+1), color.Black) // the axis
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.Set(x, y, c)
		}
	}
}
