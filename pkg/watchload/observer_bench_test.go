package watchload

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkObserverEvent is the check and timing of one event of a
// client-go informer (Observer.Event), keys_N distinct keys updated in
// turn.
func BenchmarkObserverEvent(b *testing.B) {
	for _, keys := range []int{1, 1000} {
		b.Run(fmt.Sprintf("keys_%d", keys), func(b *testing.B) {
			const n = 1 << 16
			rec := NewRecorder(nil, []string{testPrefix})
			keyOf := make([]string, keys) // as client-go's path builds them
			for i := range keys {
				keyOf[i] = fmt.Sprintf("%sns/k%d", testPrefix, i)
			}
			for i := range n {
				rec.hist[0].append(histEntry{rev: int64(i + 2), key: keyOf[i%keys], put: true})
			}
			rec.watermark.Store(n + 1)
			env := NewEnv(time.Now(), 1<<16, 1, rec)
			o := env.NewObserver(0, testPrefix)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%n == 0 {
					o.StartWatch(2)
				}
				o.Event(WatchEvent{Key: []byte(keyOf[i%n%keys]), Revision: int64(i%n + 2)}, 0)
				i++
			}
			if env.Violations.Total() != 0 {
				b.Fatalf("violations: %+v", env.Violations.Samples())
			}
		})
	}
}
