package subscribers_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/internal/subscribers"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func TestPublishReachesEverySubscriber(t *testing.T) {
	var s subscribers.Set[int] // the zero value is ready
	s.Publish(1)               // nobody yet
	var a, b []int
	unA := s.Subscribe(func(v int) { a = append(a, v) })
	unB := s.Subscribe(func(v int) { b = append(b, v) })
	s.Publish(2)
	unA()
	s.Publish(3)
	unA() // again: removes nothing else
	s.Publish(4)
	unB()
	s.Publish(5)
	if want := []int{2}; !slices.Equal(a, want) {
		t.Errorf("a got %v, want %v", a, want)
	}
	if want := []int{2, 3, 4}; !slices.Equal(b, want) {
		t.Errorf("b got %v, want %v", b, want)
	}
}

func TestUnsubscribeDuringDelivery(t *testing.T) {
	var s subscribers.Set[int]
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	unsubscribe := s.Subscribe(func(v int) {
		calls.Add(1)
		if v == 1 {
			close(entered)
			<-release
		}
	})
	published := make(chan struct{})
	go func() {
		defer close(published)
		s.Publish(1)
	}()
	<-entered

	// An unsubscribe and a Subscribe from elsewhere wait for the delivery under way.
	unsubscribed, subscribed := make(chan struct{}), make(chan struct{})
	var late atomic.Int32
	go func() {
		defer close(unsubscribed)
		unsubscribe()
	}()
	go func() {
		defer close(subscribed)
		s.Subscribe(func(int) { late.Add(1) })
	}()
	select {
	case <-unsubscribed:
		t.Fatal("unsubscribe returned while its callback was being called")
	case <-subscribed:
		t.Fatal("Subscribe returned during a delivery")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-published
	<-unsubscribed
	<-subscribed
	if late.Load() != 0 {
		t.Fatal("a callback added during a delivery was handed it")
	}

	// Once unsubscribe returned, the callback is not called again.
	s.Publish(2)
	if n := calls.Load(); n != 1 {
		t.Fatalf("callback called %d times, want once", n)
	}
	if late.Load() != 1 {
		t.Fatal("the later subscriber missed a delivery")
	}
}

// TestConcurrent runs Subscribe, Publish and unsubscribe from many goroutines at once (under
// -race): deliveries never overlap and no callback runs after its unsubscribe returned.
func TestConcurrent(t *testing.T) {
	var s subscribers.Set[int]
	var inside atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				s.Publish(i)
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				var gone atomic.Bool
				unsubscribe := s.Subscribe(func(int) {
					if inside.Add(1) != 1 {
						t.Error("two deliveries at once")
					}
					if gone.Load() {
						t.Error("callback called after its unsubscribe returned")
					}
					inside.Add(-1)
				})
				unsubscribe()
				gone.Store(true)
				unsubscribe()
			}
		}()
	}
	wg.Wait()
}
