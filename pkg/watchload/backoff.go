package watchload

import (
	"math"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// The reflector's backoff between ListAndWatch iterations, from client-go
// tools/cache/reflector.go (defaultBackoffInit, defaultBackoffMax,
// defaultBackoffFactor, defaultBackoffJitter, defaultBackoffReset).
const (
	reflectorBackoffInitial = 800 * time.Millisecond
	reflectorBackoffCap     = 30 * time.Second
	reflectorBackoffFactor  = 2.0
	reflectorBackoffJitter  = 1.0
	reflectorBackoffReset   = 2 * time.Minute
)

// cacherRestartPeriod is the fixed pause before kube-apiserver's watch
// cache lists and watches again after its watch ended: the cacher runs
// startCaching under wait.Until with a one-second period and no jitter
// (k8s.io/apiserver/pkg/storage/cacher/cacher.go NewCacherFromConfig).
const cacherRestartPeriod = time.Second

// Delayer returns the pause before the next ListAndWatch iteration.
type Delayer interface {
	// Next returns the next pause; it is called once per iteration, after
	// the iteration ended.
	Next() time.Duration
}

// Backoff is client-go's reflector backoff: apimachinery's wait.Backoff
// with Duration 800 ms, Factor 2, Jitter 1, Cap 30 s and Steps
// ceil(Cap/Duration), behind DelayWithReset(clock, 2 min)
// (client-go tools/cache/reflector.go; k8s.io/apimachinery/pkg/util/wait/
// backoff.go delay, backoffManager).
//
// Step k (from 0, since the last reset) waits base_k + U*base_k with U
// uniform in [0, 1) and base = 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30, ...
// seconds. The state returns to the first step when more than 2 minutes
// have passed since the previous reset (or since creation) at the time of
// a step: the reset clock is not restarted by steps, only by resets.
// wait.Backoff computes the base; the jitter is added here, with the same
// formula as wait.Jitter, so that it can come from an injected source. A
// Backoff is safe for concurrent use if its random source is.
type Backoff struct {
	base wait.DelayFunc
	rand func() float64
}

var _ Delayer = (*Backoff)(nil)

// newReflectorBackoff returns client-go's reflector backoff reading time
// from clk (nil: the real clock) and jitter from rnd, which returns values
// in [0, 1) (nil: math/rand/v2).
func newReflectorBackoff(clk clock.Clock, rnd func() float64) *Backoff {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	base := wait.Backoff{
		Duration: reflectorBackoffInitial,
		Factor:   reflectorBackoffFactor,
		Cap:      reflectorBackoffCap,
		Steps:    int(math.Ceil(float64(reflectorBackoffCap) / float64(reflectorBackoffInitial))),
	}
	return &Backoff{base: base.DelayWithReset(clk, reflectorBackoffReset), rand: rnd}
}

// Next returns the next jittered delay and advances the backoff.
func (b *Backoff) Next() time.Duration {
	d := b.base()
	return d + time.Duration(b.rand()*reflectorBackoffJitter*float64(d))
}

// fixedDelay is a Delayer that always returns itself.
type fixedDelay time.Duration

// Next returns d.
func (d fixedDelay) Next() time.Duration { return time.Duration(d) }
