"""Builds apache/spark-kubernetes-operator 1.0.0 into the peers' directory bench/peer.py runs it from.

Its operator jar is on no registry this project may use, so it is built here from its own source, which
this repository does not hold: ``--source`` names a checkout of its ``1.0.0`` tag, or a git directory
holding that tag. Its Gradle build is not run (Gradle and its plugins are not on this machine); what it
declares is read instead and compiled with Maven, the three modules as one jar:

1. the ``src/main/java`` and ``src/main/resources`` of ``spark-operator-api``,
   ``spark-submission-worker`` and ``spark-operator`` are copied into one tree in a temporary directory;
2. a pom is written from ``gradle/libs.versions.toml`` and the modules' ``build.gradle`` files (their
   dependencies, exclusions, pinned versions, Java release and compiler flags), with the two versions
   Maven Central does not have replaced (``SUBSTITUTIONS``);
3. the one source file that depends on the replaced operator framework's API is adjusted
   (``adapt_josdk_metrics``);
4. ``mvn package`` builds the jar and copies its runtime classpath; the jar, ``lib/``, the CRDs of its
   Helm chart and ``VERSION`` are laid out in ``--out``, replacing what was there only once all is built.

    .venv/bin/python bench/build_apache_peer.py --source <checkout or git directory>
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from peer import APACHE_DIR, JAVA_25, PEERS_DIR

TAG = "1.0.0"
MODULES = ("spark-operator-api", "spark-submission-worker", "spark-operator")
MAIN_CLASS = "org.apache.spark.k8s.operator.SparkOperator"
JAR_NAME = "spark-kubernetes-operator"  # its shadow jar's name, which peer.py runs
CHART_CRDS = Path("build-tools/helm/spark-kubernetes-operator/crds")
# Maven's own plugins, pinned so that a build next year resolves what this one did.
MAVEN_PLUGINS = {
    "maven-compiler-plugin": "3.14.0",
    "maven-dependency-plugin": "3.8.1",
    "maven-jar-plugin": "3.4.2",
    "maven-resources-plugin": "3.3.1",
    "maven-surefire-plugin": "3.5.2",
}


@dataclass(frozen=True)
class Substitution:
    declared: str
    used: str
    why: str


# Libraries (libs.versions.toml aliases) whose declared version Maven Central does not have.
SUBSTITUTIONS = {
    "operator-framework": Substitution(
        "5.5.0", "5.2.3", "java-operator-sdk's newest on Maven Central; see adapt_josdk_metrics"
    ),
    "crd-generator-annotations": Substitution(
        "7.8.0", "7.9.0", "fabric8's generator-annotations (compile time only) skips 7.8.0 on Maven Central"
    ),
}
# compileOnly libraries that another dependency brings at runtime anyway: declared "provided" in the one
# pom, Maven would keep them out of lib/.
PROVIDED_BY_OTHERS = {"spark-core": "spark-kubernetes depends on it"}
# What the root build.gradle pins a whole group to (its resolutionStrategy), as Maven can pin it.
GROUP_PINS = {
    "io.netty": (("io.netty", "netty-bom", "import"),),
    "org.apache.hadoop": (
        ("org.apache.hadoop", "hadoop-client-api", ""),
        ("org.apache.hadoop", "hadoop-client-runtime", ""),
    ),
}

# java-operator-sdk 5.2.3 keeps ResourceAction in the controller event source's package, and its Metrics
# interface has none of these seven callbacks (5.5.0 renamed them); the metrics class still defines them,
# so only their @Override goes. bench/peer.py runs the operator with these metrics off.
JOSDK_METRICS_SOURCE = Path("spark-operator/src/main/java/org/apache/spark/k8s/operator/metrics/source")
JOSDK_METRICS_FILE = "OperatorJosdkMetrics.java"
RESOURCE_ACTION_IMPORTS = (
    "import io.javaoperatorsdk.operator.processing.event.source.ResourceAction;",
    "import io.javaoperatorsdk.operator.processing.event.source.controller.ResourceAction;",
)
CALLBACKS_NOT_IN_OLDER_METRICS = (
    "eventReceived",
    "reconciliationSubmitted",
    "reconciliationFailed",
    "reconciliationFinished",
    "cleanupDone",
    "reconciliationStarted",
    "reconciliationSucceeded",
)


class BuildError(Exception):
    pass


@dataclass(frozen=True)
class Exclusion:
    group: str
    module: str = "*"


@dataclass(frozen=True)
class Declared:
    """One ``<configuration>(libs.<accessor>) { exclude ... }`` of a build.gradle."""

    configuration: str  # implementation, compileOnly or annotationProcessor
    alias: str  # as libs.versions.toml spells it
    exclusions: frozenset[Exclusion] = frozenset()


@dataclass(frozen=True)
class Library:
    group: str
    artifact: str
    version: str


@dataclass
class Dependency:
    library: Library
    scope: str  # "compile" or "provided"
    exclusions: frozenset[Exclusion] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Project:
    """What the pom needs from the Gradle build."""

    group: str
    version: str
    release: str
    compiler_args: tuple[str, ...]
    dependencies: tuple[Dependency, ...]
    processors: tuple[Library, ...]
    managed: tuple[tuple[Library, str], ...]  # (library, "import" for a BOM or "")


DECLARATION = re.compile(
    r"^[ \t]*(?P<conf>implementation|compileOnly|annotationProcessor)\(libs\.(?P<accessor>[\w.]+)\)"
    r"(?:[ \t]*\{(?P<body>.*?)^[ \t]*\})?",
    re.MULTILINE | re.DOTALL,
)
EXCLUDE = re.compile(r"""exclude\(?\s*group:\s*["']([^"']+)["'](?:\s*,\s*module:\s*["']([^"']+)["'])?""")
PIN = re.compile(
    r"""requested\.group\s*==\s*["']([^"']+)["'].*?useVersion\(libs\.versions\.([\w.]+)\.get\(\)\)""", re.DOTALL
)


def accessor(alias: str) -> str:
    """Gradle's ``libs.`` accessor for a version-catalog alias: its separators become dots."""
    return re.sub(r"[-_]", ".", alias)


def braced_block(text: str, opener: str) -> str:
    """What stands between the braces that follow ``opener`` in ``text``."""
    start = text.find(opener)
    if start < 0:
        raise BuildError(f"no {opener!r} in build.gradle")
    position = text.index("{", start + len(opener) - 1)
    depth = 0
    for index in range(position, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[position + 1 : index]
    raise BuildError(f"{opener!r} in build.gradle has no closing brace")


def exclusions(text: str) -> frozenset[Exclusion]:
    return frozenset(Exclusion(group, module or "*") for group, module in EXCLUDE.findall(text))


def declarations(build_gradle: str, catalog: Mapping[str, object]) -> list[Declared]:
    """The main (not test) library dependencies a build.gradle declares, by their catalog alias."""
    by_accessor = {accessor(alias): alias for alias in catalog}
    found = []
    for match in DECLARATION.finditer(build_gradle):
        alias = by_accessor.get(match["accessor"])
        if alias is None:
            raise BuildError(f"build.gradle names libs.{match['accessor']}, which libs.versions.toml does not have")
        found.append(Declared(match["conf"], alias, exclusions(match["body"] or "")))
    return found


def library(alias: str, versions: Mapping[str, str], libraries: Mapping[str, Mapping[str, object]]) -> Library:
    """A catalog entry, at the version this build uses (``SUBSTITUTIONS``)."""
    entry = libraries[alias]
    if "module" in entry:
        group, artifact = str(entry["module"]).split(":")
    else:
        group, artifact = str(entry["group"]), str(entry["name"])
    version = entry.get("version")
    if isinstance(version, dict):
        version = versions[version["ref"]]
    if not isinstance(version, str):
        raise BuildError(f"libs.versions.toml: library {alias!r} has no version")
    substitution = SUBSTITUTIONS.get(alias)
    if substitution is not None:
        if version != substitution.declared:
            raise BuildError(
                f"libs.versions.toml: {alias} is {version}, but this script replaces {substitution.declared} "
                f"(by {substitution.used}); check that --source is the {TAG} tag, or revise SUBSTITUTIONS"
            )
        version = substitution.used
    return Library(group, artifact, version)


def project(root_gradle: str, module_gradles: Sequence[str], catalog_toml: str) -> Project:
    """The merged modules' build, read from their build files and version catalog."""
    catalog = tomllib.loads(catalog_toml)
    versions: dict[str, str] = catalog["versions"]
    libraries: dict[str, dict[str, object]] = catalog["libraries"]
    everywhere = exclusions(braced_block(root_gradle, "configurations.all {"))
    declared = declarations(braced_block(root_gradle, "subprojects {"), libraries)
    for text in module_gradles:
        declared += declarations(text, libraries)

    merged: dict[str, Dependency] = {}
    processors: dict[str, Library] = {}
    for one in declared:
        lib = library(one.alias, versions, libraries)
        if one.configuration == "annotationProcessor":
            processors[one.alias] = lib
            continue
        if one.configuration == "compileOnly" and one.alias in PROVIDED_BY_OTHERS:
            continue
        scope = "compile" if one.configuration == "implementation" else "provided"
        known = merged.get(one.alias)
        if known is None:
            merged[one.alias] = Dependency(lib, scope, one.exclusions)
        else:
            # Declared by two modules: what either one keeps is on the classpath.
            known.scope = "compile" if "compile" in (known.scope, scope) else "provided"
            known.exclusions &= one.exclusions
    for dependency in merged.values():
        dependency.exclusions |= everywhere

    managed: list[tuple[Library, str]] = []
    for group, version_key in PIN.findall(root_gradle):
        if group not in GROUP_PINS:
            raise BuildError(f"build.gradle pins group {group}, which GROUP_PINS does not map to Maven artifacts")
        version = versions[{accessor(key): key for key in versions}[version_key]]
        managed += [(Library(g, a, version), kind) for g, a, kind in GROUP_PINS[group]]

    return Project(
        group=gradle_setting(root_gradle, r"group\s*=\s*[\"']([^\"']+)[\"']"),
        version=gradle_setting(root_gradle, r"version\s*=\s*[\"']([^\"']+)[\"']"),
        release=gradle_setting(root_gradle, r"options\.release\s*=\s*(\d+)"),
        compiler_args=tuple(re.findall(r"""options\.compilerArgs\.add\(["']([^"']+)["']\)""", root_gradle)),
        dependencies=tuple(merged.values()),
        processors=tuple(processors.values()),
        managed=tuple(managed),
    )


def gradle_setting(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    if match is None:
        raise BuildError(f"build.gradle: nothing matches {pattern}")
    return match[1]


def _child(parent: ET.Element, tag: str, text: str | None = None) -> ET.Element:
    element = ET.SubElement(parent, tag)
    element.text = text
    return element


def _coordinates(parent: ET.Element, lib: Library) -> None:
    _child(parent, "groupId", lib.group)
    _child(parent, "artifactId", lib.artifact)
    _child(parent, "version", lib.version)


def _exclusions(parent: ET.Element, excluded: Iterable[Exclusion]) -> None:
    ordered = sorted(excluded, key=lambda e: (e.group, e.module))
    if not ordered:
        return
    element = _child(parent, "exclusions")
    for one in ordered:
        exclusion = _child(element, "exclusion")
        _child(exclusion, "groupId", one.group)
        _child(exclusion, "artifactId", one.module)


def _plugin(parent: ET.Element, artifact: str) -> ET.Element:
    plugin = _child(parent, "plugin")
    _coordinates(plugin, Library("org.apache.maven.plugins", artifact, MAVEN_PLUGINS[artifact]))
    return plugin


def pom(build: Project) -> str:
    root = ET.Element("project", xmlns="http://maven.apache.org/POM/4.0.0")
    _child(root, "modelVersion", "4.0.0")
    _coordinates(root, Library(build.group, JAR_NAME, build.version))
    _child(root, "packaging", "jar")
    properties = _child(root, "properties")
    _child(properties, "project.build.sourceEncoding", "UTF-8")

    if build.managed:
        managed_list = _child(_child(root, "dependencyManagement"), "dependencies")
        for lib, kind in build.managed:
            entry = _child(managed_list, "dependency")
            _coordinates(entry, lib)
            if kind == "import":
                _child(entry, "type", "pom")
                _child(entry, "scope", "import")

    dependencies = _child(root, "dependencies")
    for dependency in build.dependencies:
        entry = _child(dependencies, "dependency")
        _coordinates(entry, dependency.library)
        if dependency.scope != "compile":
            _child(entry, "scope", dependency.scope)
        _exclusions(entry, dependency.exclusions)

    built = _child(root, "build")
    _child(built, "finalName", JAR_NAME)
    plugins = _child(built, "plugins")
    compiler = _child(_plugin(plugins, "maven-compiler-plugin"), "configuration")
    _child(compiler, "release", build.release)
    arguments = _child(compiler, "compilerArgs")
    for argument in build.compiler_args:
        _child(arguments, "arg", argument)
    paths = _child(compiler, "annotationProcessorPaths")
    for lib in build.processors:
        _coordinates(_child(paths, "path"), lib)
    archive = _child(_child(_plugin(plugins, "maven-jar-plugin"), "configuration"), "archive")
    entries = _child(archive, "manifestEntries")
    _child(entries, "Implementation-Title", "Spark Kubernetes Operator")
    _child(entries, "Implementation-Version", build.version)
    _plugin(plugins, "maven-resources-plugin")
    _plugin(plugins, "maven-surefire-plugin")
    execution = _child(_child(_plugin(plugins, "maven-dependency-plugin"), "executions"), "execution")
    _child(execution, "id", "runtime-classpath")
    _child(execution, "phase", "package")
    _child(_child(execution, "goals"), "goal", "copy-dependencies")
    copy = _child(execution, "configuration")
    _child(copy, "includeScope", "runtime")
    _child(copy, "outputDirectory", "${project.build.directory}/lib")

    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def adapt_josdk_metrics(source: str) -> str:
    """The metrics class, compilable against java-operator-sdk 5.2.3 (see CALLBACKS_NOT_IN_OLDER_METRICS)."""
    old_import, new_import = RESOURCE_ACTION_IMPORTS
    if source.count(old_import) != 1:
        raise BuildError(f"{JOSDK_METRICS_FILE}: expected one {old_import!r}; is --source the {TAG} tag?")
    adapted = source.replace(old_import, new_import)
    for name in CALLBACKS_NOT_IN_OLDER_METRICS:
        overridden = re.compile(rf"^[ \t]*@Override[ \t]*\n(?=[ \t]*public\b[^(;{{]*\b{name}\()", re.MULTILINE)
        adapted, found = overridden.subn("", adapted)
        if found != 1:
            raise BuildError(f"{JOSDK_METRICS_FILE}: expected one @Override of {name}, found {found}")
    return adapted


def crd_file_name(chart_file: str) -> str:
    """``<plural>.<group>-<version>.yaml`` (its chart's name) as ``<group>_<plural>.yaml`` (peer.py's)."""
    match = re.fullmatch(r"(?P<plural>[a-z0-9-]+)\.(?P<group>[a-z0-9.-]+)-v[0-9a-z]+\.ya?ml", chart_file)
    if match is None:
        raise BuildError(f"{CHART_CRDS}/{chart_file}: not <plural>.<group>-<version>.yaml")
    return f"{match['group']}_{match['plural']}.yaml"


def is_git_directory(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def extract_source(source: Path, into: Path) -> str:
    """The source tree of TAG under ``into``: ``source`` itself if it is a checkout, else TAG extracted
    from the git directory ``source``. Returns what the source is, for the build's SOURCE file."""
    if not is_git_directory(source):
        if not (source / "build.gradle").is_file():
            raise BuildError(f"--source {source}: neither a checkout (no build.gradle) nor a git directory")
        shutil.copytree(source, into, ignore=shutil.ignore_patterns(".git", "build", ".gradle"))
        return f"checkout {source}"
    commit = git(source, "rev-parse", "--verify", f"refs/tags/{TAG}^{{commit}}")
    archive = into.parent / "source.tar"
    git(source, "archive", "--format=tar", f"--output={archive}", commit)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return f"tag {TAG}, commit {commit}"


def git(git_dir: Path, *args: str) -> str:
    done = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"git {' '.join(args)} in {git_dir}: {done.stderr.strip()}")
    return done.stdout.strip()


def merge_modules(source: Path, tree: Path) -> None:
    """Each module's main sources and resources, in one Maven tree (they compile as one jar)."""

    def copy_new(from_path: str, to_path: str) -> object:
        if Path(to_path).exists():
            raise BuildError(f"two modules hold {Path(to_path).relative_to(tree)}")
        return shutil.copy2(from_path, to_path)

    for module in MODULES:
        for kind in ("java", "resources"):
            found = source / module / "src" / "main" / kind
            if found.is_dir():
                shutil.copytree(found, tree / "src" / "main" / kind, dirs_exist_ok=True, copy_function=copy_new)


def build(source: Path, out: Path, java_home: Path, *, maven: str = "mvn") -> None:
    with tempfile.TemporaryDirectory(prefix="apache-peer-build-") as scratch:
        work = Path(scratch)
        checkout = work / "source"
        origin = extract_source(source, checkout)
        gradle = [(checkout / module / "build.gradle").read_text() for module in MODULES]
        spec = project(
            (checkout / "build.gradle").read_text(), gradle, (checkout / "gradle" / "libs.versions.toml").read_text()
        )
        if spec.version != TAG:
            raise BuildError(f"--source is version {spec.version} (its build.gradle), not {TAG}: check out tag {TAG}")

        tree = work / "maven"
        merge_modules(checkout, tree)
        metrics = tree / JOSDK_METRICS_SOURCE.relative_to("spark-operator") / JOSDK_METRICS_FILE
        metrics.write_text(adapt_josdk_metrics(metrics.read_text()))
        (tree / "pom.xml").write_text(pom(spec))

        env = {**os.environ, "JAVA_HOME": str(java_home)}
        command = [maven, "--batch-mode", "--no-transfer-progress", "-DskipTests", "package"]
        print(f"{' '.join(command)} in {tree} (JAVA_HOME={java_home})", flush=True)
        if subprocess.run(command, cwd=tree, env=env).returncode != 0:
            raise BuildError(f"mvn package failed (its output is above); the tree was {tree}")

        staged = work / "out"
        staged.mkdir()
        shutil.copy2(tree / "target" / f"{JAR_NAME}.jar", staged / f"{JAR_NAME}.jar")
        shutil.copytree(tree / "target" / "lib", staged / "lib")
        (staged / "crds").mkdir()
        for crd in sorted((checkout / CHART_CRDS).iterdir()):
            shutil.copy2(crd, staged / "crds" / crd_file_name(crd.name))
        (staged / "VERSION").write_text(f"{spec.version}\n")
        substituted = "; ".join(f"{a} {s.declared} -> {s.used}" for a, s in SUBSTITUTIONS.items())
        (staged / "SOURCE").write_text(f"{origin}\nreplaced: {substituted}\n")

        out.parent.mkdir(parents=True, exist_ok=True)
        replaced = out.with_name(f".{out.name}.old")
        shutil.rmtree(replaced, ignore_errors=True)
        if out.exists():
            out.rename(replaced)
        shutil.move(staged, out)
        shutil.rmtree(replaced, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--source", type=Path, required=True, help=f"a checkout of tag {TAG}, or a git directory holding it"
    )
    parser.add_argument("--out", type=Path, default=PEERS_DIR / APACHE_DIR, help="default: %(default)s")
    parser.add_argument(
        "--java-home", type=Path, default=JAVA_25.parent.parent, help="a JDK 21 or later (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        build(args.source.resolve(), args.out.resolve(), args.java_home)
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"built {args.out} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
