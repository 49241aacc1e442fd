package dashboard

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The usage chart's y-axis labels are round steps, and the top one is at or
// above the tallest bar.
func TestFirstHourYTicks(t *testing.T) {
	for _, c := range []struct {
		peak int64
		want []int64
	}{
		{0, []int64{0, 1, 2, 3, 4}},
		{1, []int64{0, 1}},
		{3, []int64{0, 1, 2, 3}},
		{5, []int64{0, 1, 2, 3, 4, 5}},
		{7, []int64{0, 2, 4, 6, 8}},
		{10, []int64{0, 2, 4, 6, 8, 10}},
		{11, []int64{0, 5, 10, 15}},
		{24, []int64{0, 5, 10, 15, 20, 25}},
		{26, []int64{0, 10, 20, 30}},
		{1234, []int64{0, 500, 1000, 1500}},
	} {
		if diff := cmp.Diff(c.want, yTicks(c.peak)); diff != "" {
			t.Errorf("yTicks(%d) (-want +got):\n%s", c.peak, diff)
		}
	}
}
