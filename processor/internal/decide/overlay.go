package decide

import (
	"fmt"
	"slices"
)

// Overlay is the state of one batch's keys as its decisions go: states Put by
// earlier records of the batch, committed or not, over a lookup of the
// committed state (Badger in the processor). Get a key's state, decide with
// Admit and Apply, Put the result; after the batch's transaction commits,
// write Changes to the store. One Overlay serves one batch of one partition
// and is not safe for concurrent use; it costs one map entry per changed key.
type Overlay struct {
	lookup  func(key string) (*State, error)
	changed map[string]State
	order   []string
}

// NewOverlay layers a batch over lookup, which returns a key's committed
// state or nil when it has none.
func NewOverlay(lookup func(key string) (*State, error)) *Overlay {
	return &Overlay{lookup: lookup, changed: map[string]State{}}
}

// Get returns the key's state as the batch left it so far, else the
// committed one, else nil. The result is the caller's copy.
func (o *Overlay) Get(key string) (*State, error) {
	if st, ok := o.changed[key]; ok {
		return &st, nil
	}
	st, err := o.lookup(key)
	if err != nil {
		return nil, fmt.Errorf("look up state of %q: %w", key, err)
	}
	return st, nil
}

// Put records the key's new state for the rest of the batch.
func (o *Overlay) Put(key string, st State) {
	if _, ok := o.changed[key]; !ok {
		o.order = append(o.order, key)
	}
	o.changed[key] = st
}

// Changes returns the keys Put in this batch, each once, in the order of
// their first change; Get gives their final states.
func (o *Overlay) Changes() []string { return slices.Clone(o.order) }
