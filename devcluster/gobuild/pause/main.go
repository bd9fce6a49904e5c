// The pod sandbox's process: it holds the pod's namespaces open and does nothing else. The
// upstream pause image cannot be pulled here, so the devcluster builds its own.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of its namespace a process ignores signals it has no handler for, so the
	// runtime's SIGTERM at pod deletion would otherwise wait out the full grace period.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
