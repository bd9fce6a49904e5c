#!/bin/bash
# Entrypoint of the devcluster's Spark images. It behaves like the official apache/spark image's:
#   driver ARGS...    spark-submit in client mode inside the driver pod, bound to the pod's address
#   executor          the Kubernetes executor backend, configured by the env the driver gives it
#   anything else     run as given
set -eo pipefail

# Hadoop's login (and so Spark) fails when the uid has no passwd entry, which happens when a pod
# runs as an arbitrary uid: give it one through nss_wrapper.
ensure_passwd_entry() {
  local uid gid wrapper
  uid="$(id -u)"
  getent passwd "$uid" >/dev/null 2>&1 && return 0
  gid="$(id -g)"
  for wrapper in /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so /lib/*/libnss_wrapper.so; do
    [ -s "$wrapper" ] || continue
    NSS_WRAPPER_PASSWD="$(mktemp)"
    NSS_WRAPPER_GROUP="$(mktemp)"
    printf 'spark:x:%s:%s:%s:%s:/bin/false\n' "$uid" "$gid" "${SPARK_USER_NAME:-anonymous uid}" "$SPARK_HOME" >"$NSS_WRAPPER_PASSWD"
    printf 'spark:x:%s:\n' "$gid" >"$NSS_WRAPPER_GROUP"
    export LD_PRELOAD="$wrapper" NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP
    return 0
  done
}

# Started as root (a pod's runAsUser: 0): run Spark as the image's spark user, like the official image.
as_spark_user() {
  if [ "$(id -u)" -eq 0 ]; then
    echo setpriv --reuid=185 --regid=185 --init-groups
  fi
}

if [ -z "$JAVA_HOME" ]; then
  JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
fi

# The driver passes executor JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ...: keep their order.
executor_java_opts=()
while IFS= read -r name; do
  executor_java_opts+=("${!name}")
done < <(compgen -e | grep -E '^SPARK_JAVA_OPT_[0-9]+$' | sort -t_ -k4,4n)

classpath="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*"
if [ -n "$SPARK_EXTRA_CLASSPATH" ]; then
  classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
fi
if [ -n "${HADOOP_CONF_DIR+x}" ]; then
  classpath="$HADOOP_CONF_DIR:$classpath"
fi
if [ -n "${SPARK_CONF_DIR+x}" ]; then
  classpath="$SPARK_CONF_DIR:$classpath"
else
  classpath="$SPARK_HOME/conf:$classpath"
fi
# Files the driver ships land in the working directory; executors load classes from there too.
classpath="$classpath:$PWD"

if [ -n "${PYSPARK_PYTHON+x}" ]; then
  export PYSPARK_PYTHON
fi
if [ -n "${PYSPARK_DRIVER_PYTHON+x}" ]; then
  export PYSPARK_DRIVER_PYTHON
fi
if [ -n "$HADOOP_HOME" ] && [ -z "$SPARK_DIST_CLASSPATH" ]; then
  SPARK_DIST_CLASSPATH="$("$HADOOP_HOME/bin/hadoop" classpath)"
  export SPARK_DIST_CLASSPATH
fi

case "$1" in
  driver)
    shift
    command=(
      "$SPARK_HOME/bin/spark-submit"
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS"
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS"
      --deploy-mode client
      "$@"
    )
    ;;
  executor)
    shift
    command=(
      "$JAVA_HOME/bin/java"
      "${executor_java_opts[@]}"
      "-Xms$SPARK_EXECUTOR_MEMORY"
      "-Xmx$SPARK_EXECUTOR_MEMORY"
      -cp "$classpath${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}"
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
      --driver-url "$SPARK_DRIVER_URL"
      --executor-id "$SPARK_EXECUTOR_ID"
      --cores "$SPARK_EXECUTOR_CORES"
      --app-id "$SPARK_APPLICATION_ID"
      --hostname "$SPARK_EXECUTOR_POD_IP"
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID"
      --podName "$SPARK_EXECUTOR_POD_NAME"
    )
    ;;
  *)
    exec "$@"
    ;;
esac

ensure_passwd_entry
# tini reaps the JVM's children and forwards signals to the whole process group (-s: also when not PID 1).
exec $(as_spark_user) /usr/bin/tini -s -- "${command[@]}"
