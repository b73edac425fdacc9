// Package whole adds a controller to a manager once the builder has given it
// every watch.
//
// controller-runtime's builder adds its controller to the manager first and
// registers the controller's watches after. A manager that already runs (a
// kind set up once its CRD appears, with safe-start) starts the controller
// at once, so its workers may run before the builder's later watches exist;
// those start as they are registered and nobody waits for them to sync. A
// reconcile then reads caches that hold nothing yet, and their first lists
// queue the resources again (TestControllerAddedToARunningManagerWaits).
package whole

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Controller runs build with a manager that holds what build adds to it, and
// adds that to mgr once build returned: a controller is then started with
// all of its watches, which it waits for before its workers run.
func Controller(mgr ctrl.Manager, build func(ctrl.Manager) error) error {
	h := &held{Manager: mgr}
	if err := build(h); err != nil {
		return err
	}
	for _, r := range h.runnables {
		if err := mgr.Add(r); err != nil {
			return errors.Wrap(err, "cannot add the controller to the manager")
		}
	}
	return nil
}

// held is a manager whose Add only holds what it is given.
type held struct {
	ctrl.Manager
	runnables []manager.Runnable
}

func (h *held) Add(r manager.Runnable) error {
	h.runnables = append(h.runnables, r)
	return nil
}
