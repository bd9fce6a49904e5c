"""bench/build_apache_peer.py's reading of a Gradle build, its pom, and its source adjustment (pure parts)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import build_apache_peer as b  # noqa: E402

CATALOG = """
[versions]
fabric8 = "7.8.0"
operator-sdk = "5.5.0"
spark = "4.2.0"
netty = "4.2.16.Final"
hadoop = "3.5.0"
lombok = "1.18.46"

[libraries]
kubernetes-client = { group = "io.fabric8", name = "kubernetes-client", version.ref = "fabric8" }
crd-generator-annotations = { group = "io.fabric8", name = "generator-annotations", version.ref = "fabric8" }
operator-framework = { module = "io.javaoperatorsdk:operator-framework", version.ref = "operator-sdk" }
spark-core = { group = "org.apache.spark", name = "spark-core_2.13", version.ref = "spark" }
spark-kubernetes = { group = "org.apache.spark", name = "spark-kubernetes_2.13", version.ref = "spark" }
lombok = { group = "org.projectlombok", name = "lombok", version.ref = "lombok" }
junit-jupiter = { group = "org.junit.jupiter", name = "junit-jupiter", version = "6.0.0" }
"""

ROOT_GRADLE = """
allprojects {
  group = "org.example.operator"
  version = "1.0.0"
}
subprojects {
  tasks.withType(JavaCompile).configureEach {
    options.release = 21
    options.compilerArgs.add("-proc:full")
  }
  configurations.all {
    exclude group: "io.netty", module: "netty-one-native"
    resolutionStrategy.eachDependency {
      if (requested.group == "io.netty") {
        useVersion(libs.versions.netty.get())
      }
      if (requested.group == "org.apache.hadoop") {
        useVersion(libs.versions.hadoop.get())
      }
    }
  }
  dependencies {
    compileOnly(libs.lombok)
    annotationProcessor(libs.lombok)
  }
}
"""

API_GRADLE = """
dependencies {
  implementation(libs.kubernetes.client)
  compileOnly(libs.crd.generator.annotations)
  testImplementation(libs.junit.jupiter)
}
"""

WORKER_GRADLE = """
dependencies {
  implementation project(":api")
  implementation(libs.kubernetes.client) {
    exclude group: "org.yaml"
  }
  implementation(libs.spark.kubernetes) {
    exclude group: "io.fabric8"
    exclude group: "org.apache.commons", module: "commons-compress"
  }
}
"""

OPERATOR_GRADLE = """
dependencies {
  implementation(libs.operator.framework) {
    exclude group: 'com.squareup.okio'
  }
  compileOnly(libs.spark.core) {
    exclude group: "org.slf4j"
  }
  testCompileOnly(libs.lombok)
}
"""

NETTY_EVERYWHERE = b.Exclusion("io.netty", "netty-one-native")


def read() -> b.Project:
    return b.project(ROOT_GRADLE, [API_GRADLE, WORKER_GRADLE, OPERATOR_GRADLE], CATALOG)


def by_artifact(project: b.Project) -> dict[str, b.Dependency]:
    return {d.library.artifact: d for d in project.dependencies}


def test_main_dependencies_get_their_scope_version_and_exclusions() -> None:
    deps = by_artifact(read())
    assert set(deps) == {
        "lombok",
        "kubernetes-client",
        "generator-annotations",
        "spark-kubernetes_2.13",
        "operator-framework",
    }
    spark = deps["spark-kubernetes_2.13"]
    assert (spark.library.group, spark.library.version, spark.scope) == ("org.apache.spark", "4.2.0", "compile")
    assert spark.exclusions == {
        b.Exclusion("io.fabric8"),
        b.Exclusion("org.apache.commons", "commons-compress"),
        NETTY_EVERYWHERE,
    }
    assert deps["lombok"].scope == "provided"
    assert deps["operator-framework"].exclusions == {b.Exclusion("com.squareup.okio"), NETTY_EVERYWHERE}


def test_the_versions_maven_central_lacks_are_replaced() -> None:
    deps = by_artifact(read())
    assert deps["operator-framework"].library == b.Library("io.javaoperatorsdk", "operator-framework", "5.2.3")
    assert deps["generator-annotations"].library.version == "7.9.0"
    assert deps["generator-annotations"].scope == "provided"


def test_a_replaced_library_at_another_version_stops_the_build() -> None:
    with pytest.raises(b.BuildError, match=r"operator-framework is 5\.6\.0"):
        b.project(ROOT_GRADLE, [OPERATOR_GRADLE], CATALOG.replace('operator-sdk = "5.5.0"', 'operator-sdk = "5.6.0"'))


def test_a_library_declared_twice_keeps_what_either_declaration_keeps() -> None:
    client = by_artifact(read())["kubernetes-client"]
    assert client.scope == "compile"
    assert client.exclusions == {NETTY_EVERYWHERE}  # org.yaml is excluded on one path only


def test_a_compile_only_library_another_brings_at_runtime_is_not_made_provided() -> None:
    assert "spark-core_2.13" not in by_artifact(read())


def test_the_build_settings_and_pins_are_read() -> None:
    project = read()
    assert (project.group, project.version, project.release) == ("org.example.operator", "1.0.0", "21")
    assert project.compiler_args == ("-proc:full",)
    assert [lib.artifact for lib in project.processors] == ["lombok"]
    assert project.managed == (
        (b.Library("io.netty", "netty-bom", "4.2.16.Final"), "import"),
        (b.Library("org.apache.hadoop", "hadoop-client-api", "3.5.0"), ""),
        (b.Library("org.apache.hadoop", "hadoop-client-runtime", "3.5.0"), ""),
    )


def test_a_library_the_catalog_lacks_is_named() -> None:
    with pytest.raises(b.BuildError, match=r"libs\.no\.such"):
        b.project(ROOT_GRADLE, ["dependencies {\n  implementation(libs.no.such)\n}\n"], CATALOG)


def test_the_pom_carries_scopes_exclusions_pins_and_the_compiler_settings() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.fromstring(b.pom(read()))
    assert pom.findtext("m:artifactId", namespaces=ns) == b.JAR_NAME
    assert pom.findtext("m:build/m:finalName", namespaces=ns) == b.JAR_NAME
    deps = {d.findtext("m:artifactId", namespaces=ns): d for d in pom.iterfind("m:dependencies/m:dependency", ns)}
    assert deps["lombok"].findtext("m:scope", namespaces=ns) == "provided"
    assert deps["operator-framework"].find("m:scope", ns) is None
    excluded = {
        (e.findtext("m:groupId", namespaces=ns), e.findtext("m:artifactId", namespaces=ns))
        for e in deps["spark-kubernetes_2.13"].iterfind("m:exclusions/m:exclusion", ns)
    }
    assert ("io.fabric8", "*") in excluded and ("org.apache.commons", "commons-compress") in excluded
    (bom,) = [
        d
        for d in pom.iterfind("m:dependencyManagement/m:dependencies/m:dependency", ns)
        if d.findtext("m:artifactId", namespaces=ns) == "netty-bom"
    ]
    assert bom.findtext("m:scope", namespaces=ns) == "import"
    compiler = pom.find("m:build/m:plugins/m:plugin[m:artifactId='maven-compiler-plugin']/m:configuration", ns)
    assert compiler is not None
    assert compiler.findtext("m:release", namespaces=ns) == "21"
    assert [a.text for a in compiler.iterfind("m:compilerArgs/m:arg", ns)] == ["-proc:full"]


METRICS = (
    "package example;\n\n"
    f"{b.RESOURCE_ACTION_IMPORTS[0]}\n\n"
    "public class Listener implements Metrics {\n"
    "  @Override\n  public void controllerRegistered(Object controller) {}\n\n"
    + "".join(
        f"  @Override\n  public void {name}(\n      Object resource) {{}}\n\n"
        for name in b.CALLBACKS_NOT_IN_OLDER_METRICS
    )
    + "}\n"
)


def test_the_metrics_class_loses_the_moved_import_and_the_seven_overrides_only() -> None:
    adapted = b.adapt_josdk_metrics(METRICS)
    assert b.RESOURCE_ACTION_IMPORTS[0] not in adapted and b.RESOURCE_ACTION_IMPORTS[1] in adapted
    assert adapted.count("@Override") == 1
    assert "@Override\n  public void controllerRegistered(" in adapted
    for name in b.CALLBACKS_NOT_IN_OLDER_METRICS:
        assert f"\n  public void {name}(" in adapted


def test_a_metrics_class_of_another_shape_stops_the_build() -> None:
    with pytest.raises(b.BuildError, match="cleanupDone"):
        b.adapt_josdk_metrics(METRICS.replace("public void cleanupDone(", "public void cleanedUp("))
    with pytest.raises(b.BuildError, match="ResourceAction"):
        b.adapt_josdk_metrics(METRICS.replace(b.RESOURCE_ACTION_IMPORTS[0], ""))


def test_chart_crds_are_named_as_peer_py_reads_them() -> None:
    assert b.crd_file_name("sparkapplications.spark.apache.org-v1.yaml") == "spark.apache.org_sparkapplications.yaml"
    with pytest.raises(b.BuildError, match="not <plural>"):
        b.crd_file_name("values.yaml")


def test_a_braced_block_ends_at_its_own_closing_brace() -> None:
    assert b.braced_block("a { b { c } d } e { f }", "a {") == " b { c } d "
