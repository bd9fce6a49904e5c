module sparkop.io/devcluster/pause

go 1.23.0
