package watchload

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestReflectorBackoff checks client-go's delays step by step: base
// 0.8 s doubling to the 30 s cap, jitter adding up to one base, and the
// reset once more than 2 minutes have passed since the last reset.
func TestReflectorBackoff(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	wantBase := []time.Duration{ms(800), ms(1600), ms(3200), ms(6400), ms(12800), ms(25600), ms(30000), ms(30000)}
	tests := []struct {
		name   string
		jitter float64
	}{
		{name: "no jitter", jitter: 0},
		{name: "half jitter", jitter: 0.5},
		{name: "almost full jitter", jitter: 0.999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			b := newReflectorBackoff(clk, func() float64 { return tt.jitter })
			for i, base := range wantBase {
				want := base + time.Duration(tt.jitter*float64(base))
				if got := b.Next(); got != want {
					t.Fatalf("step %d: got %v, want %v", i, got, want)
				}
				clk.Step(time.Second) // 8 steps stay within 2 minutes
			}
			// More than 2 minutes after the creation (the last reset):
			// back to the first step.
			clk.Step(2 * time.Minute)
			if got, want := b.Next(), ms(800)+time.Duration(tt.jitter*float64(ms(800))); got != want {
				t.Errorf("after the reset interval: got %v, want %v", got, want)
			}
			// The reset restarted the reset clock: a step 1 minute later
			// continues from there.
			clk.Step(time.Minute)
			if got, want := b.Next(), ms(1600)+time.Duration(tt.jitter*float64(ms(1600))); got != want {
				t.Errorf("second step after the reset: got %v, want %v", got, want)
			}
		})
	}
}

func TestFixedDelay(t *testing.T) {
	d := fixedDelay(cacherRestartPeriod)
	for range 3 {
		if got := d.Next(); got != time.Second {
			t.Fatalf("cacher restart pause %v, want 1s", got)
		}
	}
}
