package clustermodel

import (
	"fmt"
	"testing"
)

// TestRolloutSteps checks the deployment controller's steps for a few
// sizes, worked by hand from rolling.go with maxSurge and maxUnavailable
// 25 %, and for every size up to 300 that the steps move every replica
// over without ever running more than r + maxSurge pods or fewer than
// r - maxUnavailable available.
func TestRolloutSteps(t *testing.T) {
	for r, want := range map[int]string{
		0: "[]",
		1: "[new 0-1 old 1-0]",
		5: "[new 0-2 old 5-4 new 2-3 old 4-2 new 3-5 old 2-1 old 1-0]",
		4: "[new 0-1 old 4-3 new 1-2 old 3-2 new 2-3 old 2-1 new 3-4 old 1-0]",
	} {
		if got := stepsText(rolloutSteps(r)); got != want {
			t.Errorf("rolloutSteps(%d) = %s, want %s", r, got, want)
		}
	}
	for r := 1; r <= 300; r++ {
		surge, unavailable := (r+3)/4, r/4
		old, nw := r, 0
		for _, s := range rolloutSteps(r) {
			if s.New {
				if s.From != nw || s.To <= nw {
					t.Fatalf("r=%d: step %+v from new at %d", r, s, nw)
				}
				nw = s.To
			} else {
				if s.From != old || s.To >= old {
					t.Fatalf("r=%d: step %+v from old at %d", r, s, old)
				}
				old = s.To
			}
			if old+nw > r+surge || (!s.New && old+nw < r-max(unavailable, 1)) {
				t.Fatalf("r=%d: after %+v, %d old and %d new pods: outside [r-%d, r+%d]", r, s, old, nw, unavailable, surge)
			}
		}
		if old != 0 || nw != r {
			t.Fatalf("r=%d: ended with %d old and %d new pods", r, old, nw)
		}
	}
}

func stepsText(steps []rolloutStep) string {
	var s []string
	for _, st := range steps {
		rs := "old"
		if st.New {
			rs = "new"
		}
		s = append(s, fmt.Sprintf("%s %d-%d", rs, st.From, st.To))
	}
	return fmt.Sprint(s)
}
