// Package parallel runs indexed jobs on a fixed number of workers and stops
// at the first error, on golang.org/x/sync/errgroup.
package parallel

import (
	"context"

	"golang.org/x/sync/errgroup"
)

// Each calls fn(ctx, worker, i) for every i in [0, n), on workers
// goroutines (at least one); worker, in [0, workers), lets fn use state of
// its own, such as one connection per worker. Jobs are handed out in
// ascending order of i. The first error cancels the ctx the others see,
// stops handing out jobs and is returned once every worker has stopped;
// Each returns ctx's error if ctx ends first.
func Each(ctx context.Context, workers, n int, fn func(ctx context.Context, worker, i int) error) error {
	workers = max(workers, 1)
	g, gctx := errgroup.WithContext(ctx)
	jobs := make(chan int)
	for w := range workers {
		g.Go(func() error {
			for i := range jobs {
				if err := fn(gctx, w, i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(jobs)
		for i := range n {
			if err := gctx.Err(); err != nil {
				return err
			}
			select {
			case jobs <- i:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	return g.Wait()
}
