package explore

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// A podLog watches the ImmortalContainer's pod and records every pod of
// that name the API server ever held, by the UID of the ImmortalContainer
// that owns it: the count of its pod creations, which status.startTimes
// must equal.
type podLog struct {
	mu      sync.Mutex
	created map[types.UID]map[types.UID]bool
	cancel  context.CancelFunc
	done    chan struct{}
	// watching closes once the first watch is open: a baseline of the API
	// server's watches counts it.
	watching chan struct{}
	once     sync.Once
}

// watchPods starts a podLog of pod name in ns.
func watchPods(cs kubernetes.Interface, ns, name string) *podLog {
	ctx, cancel := context.WithCancel(context.Background())
	l := &podLog{created: map[types.UID]map[types.UID]bool{}, cancel: cancel, done: make(chan struct{}), watching: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.run(ctx, cs, ns, name)
	}()
	return l
}

// run lists the pod and watches it from there, again from the last version
// it saw whenever the watch ends; a list after an expired watch adds what it
// finds.
func (l *podLog) run(ctx context.Context, cs kubernetes.Interface, ns, name string) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				pause(ctx)
				continue
			}
			for i := range pods.Items {
				l.record(&pods.Items[i])
			}
			rv = pods.ResourceVersion
		}
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			rv = ""
			pause(ctx)
			continue
		}
		l.once.Do(func() { close(l.watching) })
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if ev.Type != watch.Bookmark {
				l.record(p)
			}
		}
		w.Stop()
	}
}

func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
}

func (l *podLog) record(p *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range p.OwnerReferences {
		if l.created[o.UID] == nil {
			l.created[o.UID] = map[types.UID]bool{}
		}
		l.created[o.UID][p.UID] = true
	}
}

// creations is how many pods owned by owner the log has seen.
func (l *podLog) creations(owner types.UID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.created[owner])
}

// stop ends the watch.
func (l *podLog) stop() {
	l.cancel()
	<-l.done
}
