package clockwait

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestSleep(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Unix(0, 0))
	done := make(chan bool, 1)
	go func() { done <- Sleep(context.Background(), fake, time.Second) }()
	for !fake.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	select {
	case got := <-done:
		t.Fatalf("Sleep returned %v before the clock moved", got)
	default:
	}
	fake.Step(time.Second)
	if got := <-done; !got {
		t.Errorf("Sleep after the clock passed d: got %v, want true", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- Sleep(ctx, fake, time.Hour) }()
	for !fake.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if got := <-done; got {
		t.Errorf("Sleep ended by its context: got %v, want false", got)
	}
	if got := Sleep(ctx, fake, 0); got {
		t.Errorf("Sleep on an ended context: got %v, want false", got)
	}
}

func TestSleepReal(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"past moment", context.Background(), -time.Second, true},
		{"zero", context.Background(), 0, true},
		{"short", context.Background(), time.Millisecond, true},
		{"ended context, past moment", ended, -time.Second, false},
		{"ended context", ended, time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SleepReal(tt.ctx, tt.d); got != tt.want {
				t.Errorf("SleepReal(%v): got %v, want %v", tt.d, got, tt.want)
			}
		})
	}
}
