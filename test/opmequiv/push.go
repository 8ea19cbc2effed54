package opmequiv

import (
	"context"
	"fmt"
	"sync"

	"github.com/inferencestack/inferencestack/internal/image"
)

// PushBundles builds the bundle image of each directory and pushes it to
// refs[i], with a few pushes in flight.
func PushBundles(ctx context.Context, dirs, refs []string) error {
	if len(dirs) != len(refs) {
		return fmt.Errorf("%d bundle directories but %d references", len(dirs), len(refs))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				img, err := image.BuildBundle(dirs[i])
				if err == nil {
					_, err = image.Push(ctx, img, refs[i])
				}
				if err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
	for i := range dirs {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return first
}
