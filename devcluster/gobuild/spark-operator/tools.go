//go:build tools

package tools

import _ "github.com/kubeflow/spark-operator/v2/cmd/operator"
