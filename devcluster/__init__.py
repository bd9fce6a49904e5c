"""sparkop: devcluster, a real local Kubernetes control plane for tests and the demo.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from pinned sources,
kwok for fake nodes and pod lifecycles, and a Spark-driver simulator. See README.md here.

    from devcluster import Cluster
    cluster = Cluster.up("dev")          # or: python -m devcluster up
    cluster.kubeconfig, cluster.kubectl  # paths
    cluster.restart("apiserver")         # fault injection
    cluster.down()
"""

from devcluster.cluster import Cluster, ClusterError, list_clusters, prune, remove_cluster

__all__ = ["Cluster", "ClusterError", "list_clusters", "prune", "remove_cluster"]
