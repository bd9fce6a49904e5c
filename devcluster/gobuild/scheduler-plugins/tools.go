//go:build tools

// Keeps scheduler-plugins' scheduler and controller in go.mod; build.py builds them by package path.
package tools

import (
	_ "sigs.k8s.io/scheduler-plugins/cmd/controller"
	_ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
)
