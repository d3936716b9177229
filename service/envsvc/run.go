package envsvc

import (
	"context"
	"errors"
	"fmt"
	"io"

	"herd/service"
)

// RunOptions are `herd serve env`'s settings.
type RunOptions struct {
	Serve service.ServeOptions
	// Config bounds the envs of a session and the live sessions.
	Config Config
	// Shm, when set, also serves same-host clients through shared memory
	// under this name (--env shm://NAME/ID; Linux).
	Shm string
}

// Run serves every env id herd knows until ctx ends, saying so on w; see
// service.Run for how a stop is reported.
func Run(ctx context.Context, w io.Writer, o RunOptions) error {
	var errs []error
	if o.Config.MaxEnvs < 1 {
		errs = append(errs, fmt.Errorf("serve env: --max-envs: must be >= 1, got %d", o.Config.MaxEnvs))
	}
	if o.Config.MaxSessions < 1 {
		errs = append(errs, fmt.Errorf("serve env: --max-sessions: must be >= 1, got %d", o.Config.MaxSessions))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	srv := New(o.Config)
	if reg := o.Serve.Registerer(); reg != nil {
		if err := srv.RegisterMetrics(reg); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	if o.Shm == "" {
		return service.Run(ctx, w, "herd envs", o.Serve, srv.Register)
	}
	lis, err := ListenShm(o.Shm)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.ServeShm(ctx, lis) }()
	fmt.Fprintf(w, "herd: serving herd envs on shm %s\n", o.Shm)
	err = service.Run(ctx, w, "herd envs", o.Serve, srv.Register)
	cancel()
	return errors.Join(err, <-done)
}
