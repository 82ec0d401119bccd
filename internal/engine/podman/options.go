package podman

import "time"

// Options configure Connect.
type Options struct {
	// URI of the service (unix:///path, tcp://host:port, ssh://...). Empty
	// means CONTAINER_HOST, then this user's default socket.
	URI string
	// StartService starts `podman system service --time=0` on the socket when
	// it is a unix socket that nothing answers on. The service runs detached in
	// its own session, inherits the environment (CONTAINERS_CONF included) and
	// outlives the caller.
	StartService bool
	// LogDir receives the started service's stdout and stderr
	// (ServiceLogName) and a lock file. Required with StartService.
	LogDir string
	// StartTimeout bounds waiting for a started service to answer.
	StartTimeout time.Duration
	// CallTimeout bounds every call whose context has no deadline. Exec is
	// exempt: an interactive process may run for hours.
	CallTimeout time.Duration
	// Podman is the podman binary used by StartService (default: from PATH).
	Podman string
	// Getenv replaces os.Getenv (tests).
	Getenv func(string) string
}

// Service describes a service Connect started.
type Service struct {
	URI string
	PID int
	Log string
}
