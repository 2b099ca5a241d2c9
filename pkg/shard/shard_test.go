package shard

import (
	"math"
	"testing"
)

// TestRangeDisjointCompleteBalanced: for every size up to 200 and every
// shard count up to 17, the shards' blocks follow each other without gap
// or overlap from 0 to the size, and no two differ by more than one unit.
func TestRangeDisjointCompleteBalanced(t *testing.T) {
	for n := 1; n <= 17; n++ {
		for units := 0; units <= 200; units++ {
			next, lo, hi := 0, math.MaxInt, 0
			owners := make([]int, units)
			for i := range n {
				s := Shard{Index: i, Count: n}
				from, to := s.Range(units)
				if from != next {
					t.Fatalf("%d units, shard %v: starts at %d, want %d (gap or overlap)", units, s, from, next)
				}
				if to < from {
					t.Fatalf("%d units, shard %v: [%d, %d)", units, s, from, to)
				}
				for u := from; u < to; u++ {
					owners[u]++
					if !s.Owns(u, units) {
						t.Fatalf("%d units, shard %v: Owns(%d) false inside its range", units, s, u)
					}
				}
				next = to
				lo, hi = min(lo, to-from), max(hi, to-from)
			}
			if next != units {
				t.Fatalf("%d units over %d shards: the last ends at %d", units, n, next)
			}
			if hi-lo > 1 {
				t.Fatalf("%d units over %d shards: blocks of %d to %d units", units, n, lo, hi)
			}
			for u, c := range owners {
				if c != 1 {
					t.Fatalf("%d units over %d shards: unit %d owned %d times", units, n, u, c)
				}
			}
		}
	}
}

func TestRangeExamples(t *testing.T) {
	for _, c := range []struct {
		s               Shard
		units, from, to int
	}{
		{Whole, 10, 0, 10},
		{Shard{0, 3}, 10, 0, 4},
		{Shard{1, 3}, 10, 4, 7},
		{Shard{2, 3}, 10, 7, 10},
		{Shard{4, 5}, 3, 3, 3},
	} {
		if from, to := c.s.Range(c.units); from != c.from || to != c.to {
			t.Errorf("%v.Range(%d) = [%d, %d), want [%d, %d)", c.s, c.units, from, to, c.from, c.to)
		}
	}
}

// TestShareSums: the shards' shares of a rate add up to the rate.
func TestShareSums(t *testing.T) {
	for _, units := range []int{0, 1, 7, 10, 1000} {
		var sum float64
		for i := range 3 {
			sum += Shard{Index: i, Count: 3}.Share(200, units)
		}
		if math.Abs(sum-200) > 1e-9 {
			t.Errorf("%d units: shares sum to %v, want 200", units, sum)
		}
	}
	if got := (Shard{0, 3}).Share(200, 10); math.Abs(got-80) > 1e-9 {
		t.Errorf("shard 0/3 of 200 over 10 units: %v, want 80", got)
	}
}

func TestParse(t *testing.T) {
	if s, err := Parse("2", "3"); err != nil || s != (Shard{2, 3}) {
		t.Errorf("Parse(2, 3) = %v, %v", s, err)
	}
	for _, c := range [][2]string{{"3", "3"}, {"-1", "3"}, {"0", "0"}, {"x", "3"}, {"0", "three"}, {"", ""}} {
		if _, err := Parse(c[0], c[1]); err == nil {
			t.Errorf("Parse(%q, %q): no error", c[0], c[1])
		}
	}
}
