"""``sparkop status NAME``: one SparkApplication, in words, for a terminal."""

from __future__ import annotations

from datetime import UTC, datetime

from sparkop.api import spark_lines
from sparkop.core import kube as k8s
from sparkop.core.jsontypes import JSON
from sparkop.daily_cli import Target, app_drivers, find_app, run_command

# How many lines of the end of a replaced driver pod's log `sparkop status` shows per incarnation.
LOG_LINES_SHOWN = 3


def _age(stamp: str | None, now: datetime) -> str:
    if not stamp:
        return "-"
    seconds = int((now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _clock(stamp: str | None) -> str:
    return stamp[11:19] if stamp else "--:--:--"


def _executors(counts: JSON | None) -> str:
    counts = counts or {}
    parts = [f"{counts.get(phase, 0)} {phase}" for phase in ("running", "pending", "succeeded", "failed")]
    if counts.get("unknown"):
        parts.append(f"{counts['unknown']} unknown")
    return ", ".join(parts)


def _policy(spec: JSON) -> str:
    policy = spec.get("restartPolicy") or {}
    kind = policy.get("type", "Never")
    if kind == "Never":
        return "Never"
    details = []
    if "onFailureRetries" in policy:
        details.append(f"{policy['onFailureRetries']} retries")
    if "onFailureRetryInterval" in policy:
        details.append(f"every {policy['onFailureRetryInterval']}s")
    if "onSubmissionFailureRetries" in policy:
        details.append(f"{policy['onSubmissionFailureRetries']} submission retries")
    return f"{kind} ({', '.join(details)})" if details else kind


def _spark(spec: JSON) -> str:
    """The Spark the app names and the line its driver is rendered as, which can differ (an unknown
    line is rendered as the nearest known one) and decides which objects the driver gets."""
    version = spec.get("sparkVersion")
    try:
        rendered = spark_lines.release(version).line
    except (ValueError, TypeError):  # the CRD refuses these; an object from before the rule can hold one
        return f"spark {version!r} (not a Spark version: no driver can be rendered)"
    return f"spark {version or 'not set'} (rendered as {rendered})"


def render_status(app: JSON, drivers: list[JSON], now: datetime) -> str:
    """The summary text; pure, so tests can pin it."""
    meta, spec, status = app["metadata"], app.get("spec", {}), app.get("status") or {}
    state = (status.get("applicationState") or {}).get("state", "NEW")
    lines = [
        f"SparkApplication {meta['namespace']}/{meta['name']}: {state}",
        f"  {spec.get('type', '?')} app, {_spark(spec)}, image {spec.get('image') or '-'}, "
        f"restart policy {_policy(spec)}, age {_age(meta.get('creationTimestamp'), now)}",
    ]
    lines += [f"  Warning: {warning}" for warning in spark_lines.spec_warnings(spec)]
    lines.append(
        f"  Attempts: {status.get('executionAttempts', 0)} run, {status.get('submissionAttempts', 0)} submission(s)"
    )
    for record in status.get("attempts") or []:
        outcome = record.get("outcome") or "?"
        reason = f"  {record['reason']}" if record.get("reason") else ""
        message = f": {record['message']}" if record.get("message") else ""
        lines.append(
            f"    run {record.get('run', '?'):>2}  {record.get('driver', ''):<30} {outcome:<18}"
            f"{_clock(record.get('startTime'))} -> {_clock(record.get('finishTime'))}{reason}{message}"
        )
        if record.get("historyURL"):
            lines.append(f"           history: {record['historyURL']}")
    if status.get("nextAttemptTime"):
        lines.append(f"    next attempt at {status['nextAttemptTime']}")

    current = status.get("currentDriver")
    driver = next((d for d in drivers if d["metadata"]["name"] == current), None)
    if driver is not None:
        dstatus = driver.get("status") or {}
        pod = (dstatus.get("driverPod") or {}).get("name", "-")
        lines.append(
            f"  Driver: SparkDriver {current} ({dstatus.get('phase', 'Pending')}), pod {pod}, "
            f"incarnation {dstatus.get('incarnation', 0)}"
        )
        for record in dstatus.get("incarnations") or []:
            why = f" ({record['reason']})" if record.get("reason") else ""
            lines.append(
                f"    incarnation {record.get('incarnation')}: {record.get('outcome')}{why} "
                f"at {_clock(record.get('time'))}"
            )
            # The end of that pod's log, kept when the pod went (the last lines of it).
            tail = [line for line in str(record.get("logTail") or "").splitlines() if line.strip()]
            lines.extend(f"      | {line}" for line in tail[-LOG_LINES_SHOWN:])
        termination = dstatus.get("termination")
        if termination:
            lines.append(
                f"    terminated: exit code {termination.get('exitCode')}, {termination.get('reason', '')}"
                + (f": {termination['message']}" if termination.get("message") else "")
            )
    elif current:
        lines.append(f"  Driver: SparkDriver {current} (not found)")
    else:
        lines.append("  Driver: none yet")
    lines.append(f"  Executors: {_executors(status.get('executors'))}")
    info = status.get("driverInfo") or {}
    ui = info.get("webUIIngressAddress") or info.get("webUIAddress")
    lines.append(f"  Spark UI: {ui or '-'}")
    if status.get("sparkApplicationId"):
        lines.append(f"  Spark application id: {status['sparkApplicationId']}")
    error = status.get("lastError") or {}
    error_message = error.get("message") or (status.get("applicationState") or {}).get("errorMessage")
    if error_message:
        lines.append(f"  Last error: {error.get('reason', 'Error')}: {error_message}")
    return "\n".join(lines)


async def _status(kube: k8s.Kube, target: Target, reference: str) -> int:
    app = await find_app(kube, target.namespace or kube.namespace, reference)
    print(render_status(app, await app_drivers(kube, app), datetime.now(UTC)))
    return 0


def main(target: Target, name: str) -> int:
    """``sparkop status NAME``: in the context's namespace unless -n says otherwise, as kubectl."""
    return run_command("status", target, lambda kube: _status(kube, target, name))
