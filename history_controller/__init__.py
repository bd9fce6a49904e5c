"""The history controller: SparkHistoryServer -> its Deployment, Service, and Ingress or HTTPRoute."""
