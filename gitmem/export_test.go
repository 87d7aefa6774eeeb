package gitmem

import gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"

// WithLogSyncFault returns opt with f run at each sync of the
// write-ahead log, for the tests of the packages built on Update
// (package gitmem_test): the commits being synced are prepared (the
// writer's tip, which the next transaction builds on) but not yet
// durable, published to readers or answered; an error f returns is the
// sync's.
func WithLogSyncFault(opt Options, f func() error) Options {
	opt.hooks = &testHooks{env: new(gd.Env)}
	opt.hooks.env.SetFault(func(step, _ string) error {
		if step == gd.StepWALSync {
			return f()
		}
		return nil
	})
	return opt
}
