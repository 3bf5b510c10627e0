package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/dlq/internal/store"
)

func runResolve(ctx context.Context, env Env, args []string) error {
	fs := newFlags("resolve")
	resolution := fs.String("resolution", "", "`ignored` (must not be processed) or manual_fix (handled outside hookline)")
	note := fs.String("note", "", "`TEXT` saying why, for the next operator (required)")
	by := fs.String("by", "", "`NAME` of who resolves it (default $USER)")
	asJSON := fs.Bool("json", false, "print each resolution written as one JSON object")
	pos, err := parse(fs, env, "resolve", args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("resolve needs at least one <partition>:<offset>")
	}
	refs, err := parseRefs(pos)
	if err != nil {
		return err
	}
	switch *resolution {
	case store.Ignored, store.ManualFix:
	case store.Replayed:
		return usagef("--resolution replayed is written by dlq replay itself; resolve takes ignored or manual_fix")
	case "":
		return usagef("resolve needs --resolution ignored or --resolution manual_fix")
	default:
		return usagef("--resolution %q: want ignored or manual_fix", *resolution)
	}
	if strings.TrimSpace(*note) == "" {
		return usagef("resolve needs --note saying why (the next operator will ask)")
	}
	cfgUser, _ := env.Lookup("USER")
	who, err := whoFrom(*by, cfgUser)
	if err != nil {
		return err
	}
	a, err := connect(env)
	if err != nil {
		return err
	}
	defer a.close()
	// Every ref must exist before anything is written.
	if _, err := a.store.Select(ctx, store.Selection{Refs: refs}); err != nil {
		return a.kafkaErr(err)
	}
	if err := a.ensureStatusTopic(ctx); err != nil {
		return err
	}
	now := time.Now()
	for _, ref := range refs {
		rs, err := store.NewResolution(ref, *resolution, *note, who, now)
		if err != nil {
			return usagef("%v", err)
		}
		if err := a.store.Resolve(ctx, rs); err != nil {
			return err
		}
		if *asJSON {
			if err := jsonLine(env.Stdout, rs); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(env.Stdout, "%s resolved %s by %s\n", ref, rs.Resolution, rs.By)
	}
	return nil
}

// whoFrom is --by, else $USER; one of them must say who.
func whoFrom(by, user string) (string, error) {
	if w := strings.TrimSpace(by); w != "" {
		return w, nil
	}
	if w := strings.TrimSpace(user); w != "" {
		return w, nil
	}
	return "", usagef("who is this? set --by NAME (USER is not set)")
}

// ensureStatusTopic creates webhooks.dlq-status if it is missing, with as
// many partitions as webhooks.dlq, and refuses one with the wrong shape.
//
// Once it succeeded it is not checked again: topics.Ensure purges the topic
// from the client, which resets the idempotent producer's sequence numbers
// for its partitions, and the broker then takes the next resolution written
// to a partition this producer wrote before for a duplicate of the first:
// it answers with the old offset and drops it. Before this, in a dlq serve
// every write after the first could be lost that way.
func (a *app) ensureStatusTopic(ctx context.Context) error {
	if a.statusOK.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	if err := a.store.EnsureStatusTopic(ctx, a.cfg.Topics.Replication); err != nil {
		return a.kafkaErr(err)
	}
	a.statusOK.Store(true)
	return nil
}
