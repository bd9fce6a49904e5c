// sparkop's install for kubeflow's end-to-end suite, written for sparkop (bench/kubeflow_e2e.py).
//
// bench/kubeflow_e2e.py copies kubeflow's test/e2e from its Go module, renames the suite's own
// install, uninstall and webhook waits out of the way (kubeflowInstallViaHelm, ...) and points its
// envtest CRD directory at sparkopKubeflowCRDs(); this file, added beside the suite, provides the
// replacements under the names the suite's BeforeSuite and AfterSuite call. Every spec stays as
// kubeflow wrote it.

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sparkopSetting is one of the harness's settings, which it passes in the environment.
func sparkopSetting(name string) string {
	value := os.Getenv(name)
	if value == "" {
		Fail(fmt.Sprintf("%s is not set: run this suite through bench/kubeflow_e2e.py", name))
	}
	return value
}

// sparkopKubeflowCRDs is where envtest installs the CRDs from: sparkop's own CRDs of kubeflow's
// group (crds/kubeflow/), which the chart also installs when kubeflowAPI.enabled is on.
func sparkopKubeflowCRDs() string {
	return os.Getenv("SPARKOP_KUBEFLOW_CRDS")
}

// installViaHelm installs sparkop's chart (helm's own binary) in place of kubeflow's: the release
// namespace as kubeflow's suite makes it, the values bench/kubeflow_e2e.py wrote (kubeflow's
// ci-values.yaml, kubeflowAPI.enabled and the operator image built on this machine), and --wait.
func installViaHelm() {
	By("Creating release namespace")
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ReleaseNamespace}}
	Expect(k8sClient.Create(context.TODO(), namespace)).NotTo(HaveOccurred())

	By("Installing sparkop's helm chart with kubeflowAPI.enabled")
	// --take-ownership: envtest installed the same CRDs (kubeflow's group, sparkop's definitions) just
	// before, as kubeflow's suite has its own installed before its chart; the release adopts them.
	runHelm("install", ReleaseName, sparkopSetting("SPARKOP_CHART"),
		"--namespace", ReleaseNamespace, "--values", sparkopSetting("SPARKOP_VALUES"),
		"--take-ownership", "--wait", "--timeout", WaitTimeout.String())
}

// uninstallViaHelm uninstalls the release and deletes its namespace, as kubeflow's suite does.
func uninstallViaHelm() {
	By("Uninstalling sparkop's helm chart")
	runHelm("uninstall", ReleaseName, "--namespace", ReleaseNamespace, "--wait", "--timeout", WaitTimeout.String())

	By("Deleting release namespace")
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ReleaseNamespace}}
	Expect(k8sClient.Delete(context.TODO(), namespace)).NotTo(HaveOccurred())
}

func runHelm(args ...string) {
	command := exec.Command(sparkopSetting("SPARKOP_HELM"), args...)
	command.Stdout = GinkgoWriter
	command.Stderr = GinkgoWriter
	Expect(command.Run()).NotTo(HaveOccurred(), "helm %v", args)
}

// sparkop has no webhook: there is nothing to wait for before the specs run.
func waitForMutatingWebhookReady(context.Context, types.NamespacedName) error { return nil }

func waitForValidatingWebhookReady(context.Context, types.NamespacedName) error { return nil }
