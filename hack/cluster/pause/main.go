// pause is the sandbox ("infra") container of the test cluster's real node: it holds the
// pod's namespaces, reaps orphaned children and exits on SIGTERM/SIGINT. It replaces
// registry.k8s.io/pause, which cannot be pulled on these offline machines.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
