"""Where a sweeping run's steps run: ``DELIVERY_EXECUTOR``.

``deliver_documents`` (and ``generate_and_deliver``) fan out to
``DELIVERY_SWEEPERS`` sweeper ops. The setting chooses what each one is:

* ``multiprocess``: a process of the run's own container (the default);
* ``docker``: a container of the run's image (``dagster_docker.docker_executor``),
  with the Docker run launcher's network, volumes and forwarded settings;
* ``k8s``: a Kubernetes job of its own (``dagster_k8s.k8s_job_executor``), with the
  ``K8sRunLauncher``'s config maps, secrets and volumes, and its own CPU request.

Whatever the executor, every sweeper of a run starts at once: each caps its
concurrent steps at ``MAX_SWEEPERS``, the most a run can have, rather than at
the machine's CPU count (which would sweep in waves). Nothing else changes: the
claim gives each person's documents to one sender and the pacer shares the
number's limit, wherever the sweepers run. The two launchers' libraries are the
``deploy`` extra; the default needs neither.
"""

import dagster as dg

from delivery_pipeline.settings import MAX_SWEEPERS

STEP_LIMIT = {"max_concurrent": MAX_SWEEPERS}


class ExecutorUnavailable(RuntimeError):
    """``DELIVERY_EXECUTOR`` names an executor whose library is not installed."""


def sweeping_executor(kind: str) -> dg.ExecutorDefinition:
    """The executor ``DELIVERY_EXECUTOR`` names, every sweeper at once."""
    if kind == "docker":
        try:
            from dagster_docker import docker_executor
        except ImportError:
            raise _missing(kind, "dagster-docker") from None
        return docker_executor.configured(STEP_LIMIT, name="docker_sweepers")
    if kind == "k8s":
        try:
            from dagster_k8s import k8s_job_executor
        except ImportError:
            raise _missing(kind, "dagster-k8s") from None
        return k8s_job_executor.configured(STEP_LIMIT, name="k8s_sweepers")
    return dg.multiprocess_executor.configured(STEP_LIMIT, name="multiprocess_sweepers")


def _missing(kind: str, package: str) -> ExecutorUnavailable:
    return ExecutorUnavailable(
        f"DELIVERY_EXECUTOR={kind} needs {package}: install the deploy extra "
        "(pip install 'delivery_pipeline[deploy]'; the image has it)"
    )
