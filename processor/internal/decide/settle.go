package decide

import "reflect"

// Settled is what a record leaves once its plan is executed: the key's
// next state, the records to write, and for an ordered record its
// entity's next holds.
type Settled struct {
	State   State
	Effects []Effect
	// Holds are the entity's holds after the record; HoldsChanged says
	// they differ from the plan's (they are then written with the state).
	Holds        Holds
	HoldsChanged bool
}

// Settle gives what a planned record leaves, given one Result per step
// of its plan (a Call's from the processor's execution, every other
// step's from the plan itself): the key's state stepped by each route's
// result in turn (StepRoutes: Step's table per route; unrouted when the
// plan has no step) and, for an ordered record, the entity's holds after
// each route (Holds.After): held where the plan held it, else where the
// route's delivery now waits (a retry tier, the lane, dead with on_dead:
// hold) or ended.
func Settle(pl Plan, results []Result) Settled {
	in := pl.In
	rr := make([]RouteResult, len(pl.Steps))
	for i, st := range pl.Steps {
		rr[i] = RouteResult{Route: st.Route.Name, Result: results[i], Policy: st.Route.Policy}
	}
	next, effects := StepRoutes(in.State, in.Arrival, rr, in.KeyPolicy)
	out := Settled{State: next, Effects: effects}
	if in.Entity == nil {
		return out
	}
	out.Holds = in.Entity.Holds
	for i, st := range pl.Steps {
		if st.Route.Name == "" {
			continue // a decision for the key: no route to hold
		}
		w := where(effects, st.Route, in.Tiers)
		out.Holds = out.Holds.After(st.Route.Name, in.Key, in.Entity.Seq, results[i].Kind == ResultHeld, w, in.Arrival.Now)
	}
	out.HoldsChanged = !reflect.DeepEqual(in.Entity.Holds, out.Holds)
	return out
}

// where is where a route's delivery waits after its effects: in the tier
// it was sent to, parked in the lane (tier 0), dead and holding its
// entity (on_dead: hold, as if in the last of tiers), or ended (done, or
// dead otherwise).
func where(effects []Effect, rt Route, tiers int) Where {
	var w Where
	for _, e := range effects {
		if e.Route != rt.Name {
			continue
		}
		switch e.Kind {
		case ToTier:
			w.Tier = e.Tier
		case ToLane:
			w.Tier = 0
		case ToDLQ:
			if rt.HoldOnDead {
				w.Dead, w.Tier = true, tiers
			} else {
				w.Ended = true
			}
		case ToOutcomes:
			if e.Status == StatusDone || e.Status == StatusUnrouted {
				w.Ended = true
			}
		}
	}
	return w
}
