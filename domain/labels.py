"""The one place that knows sparkop's, kubeflow's and Spark's API groups, label and annotation keys.

Every object sparkop creates carries ``managed-by`` plus the keys that let a controller find
its children through an index (never a LIST per event).
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "sparkop.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
# kubeflow spark-operator's group: served besides sparkop's own with `sparkop run --kubeflow-api`
# (domain.kinds.KUBEFLOW_API), and the prefix of the pod labels kubeflow's clients select by.
KUBEFLOW_GROUP: Final = "sparkoperator.k8s.io"

MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGER: Final = "sparkop"

# sparkop's own keys. Values are bounded with naming.label_value().
APP: Final = f"{GROUP}/app"  # the owning SparkApplication (on SparkDrivers and everything below them)
DRIVER: Final = f"{GROUP}/driver"  # the owning SparkDriver (driver pod, ConfigMaps, Service, executors)
INCARNATION: Final = f"{GROUP}/incarnation"  # which driver-pod incarnation of a SparkDriver created it
RUN: Final = f"{GROUP}/run"  # on a SparkDriver: its run number within the app (never reused)
APP_GENERATION: Final = f"{GROUP}/app-generation"  # annotation on a SparkDriver: app generation it runs
# Annotation on a SparkDriver: hash of the app spec it runs, minus suspend and timeToLiveSeconds.
SPEC_HASH: Final = f"{GROUP}/spec-hash"
# On a SparkApplication a ScheduledSparkApplication started: the schedule's name, and (annotation) the
# scheduled time of the run, RFC 3339.
SCHEDULED_APP: Final = f"{GROUP}/scheduled-app"
SCHEDULED_TIME: Final = f"{GROUP}/scheduled-time"
# The owning SparkConnect (on its SparkDrivers, their pods and its Service).
CONNECT: Final = f"{GROUP}/connect"
# The owning SparkHistoryServer (on its Deployment, pods, Service, Ingress and HTTPRoute); on a
# SparkDriver (annotation): the address of the history server its runs log to.
HISTORY_SERVER: Final = f"{GROUP}/history-server"
HISTORY_URL: Final = f"{GROUP}/history-url"
COMPONENT: Final = f"{GROUP}/component"  # on app-level children (e.g. "ui" for the Spark UI Service/Ingress)

# kubeflow's labels, on every driver and executor pod of either group (what its clients, dashboards
# and kubectl habits select by): the app's name, "true", and the run's submission id (the SparkDriver's
# uid: one per run, status.submissionID of its app).
KUBEFLOW_APP_NAME: Final = f"{KUBEFLOW_GROUP}/app-name"
KUBEFLOW_LAUNCHED: Final = f"{KUBEFLOW_GROUP}/launched-by-spark-operator"
KUBEFLOW_SUBMISSION_ID: Final = f"{KUBEFLOW_GROUP}/submission-id"
# kubeflow's label on a SparkConnect's server and executor pods (its name), beside the two above.
KUBEFLOW_CONNECT_NAME: Final = f"{KUBEFLOW_GROUP}/connect-name"
# The pods kubeflow's operator (its spark-submit, and the driver that made the executors) left, as a
# server-side selector: kubeflow's label, without sparkop's managed-by (every pod of sparkop's has it; an
# adopted pod is claimed without it, so it stays in this selection until it is gone).
KUBEFLOW_LEFT_PODS: Final = f"{KUBEFLOW_LAUNCHED},!{MANAGED_BY}"
# kubeflow's label on the SparkApplications a ScheduledSparkApplication starts (its name).
KUBEFLOW_SCHEDULED_APP_NAME: Final = f"{KUBEFLOW_GROUP}/scheduled-app-name"

# Finalizer on driver pods: the driver controller must read a pod's outcome before it can vanish.
DRIVER_OUTCOME_FINALIZER: Final = f"{GROUP}/driver-outcome"
# Finalizer on executor pods of a run that bounds its failing executors: their outcome is counted first.
EXECUTOR_OUTCOME_FINALIZER: Final = f"{GROUP}/executor-outcome"

# Kueue's keys, on a SparkApplication (copied to its SparkDrivers) or a SparkDriver: the LocalQueue
# its runs queue in, and the WorkloadPriorityClass of their Workloads (Kueue's own job integrations
# read the same labels).
KUEUE_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS: Final = "kueue.x-k8s.io/priority-class"

# Spark's own keys, as spark-submit and the driver set them.
SPARK_APP_SELECTOR: Final = "spark-app-selector"
SPARK_APP_NAME: Final = "spark-app-name"
SPARK_ROLE: Final = "spark-role"
SPARK_VERSION: Final = "spark-version"
SPARK_EXEC_ID: Final = "spark-exec-id"
ROLE_DRIVER: Final = "driver"
ROLE_EXECUTOR: Final = "executor"

# Simulator annotations understood by devcluster's KWOK stages (tests and demo only).
SIM_PREFIX: Final = "sim.sparkop.io/"
