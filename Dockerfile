# The passhat image: runs the operator (`passhat operator`) and is the base for trial images
# (`passhat trial` inside). Two stages: a throwaway one that installs passhat and its
# dependencies into a virtualenv, and the runtime one that copies only that virtualenv.
#
# Any Debian bookworm base with python3.11 + venv works. hack/image/build.sh builds it
# without a Docker daemon (buildah) from a base it makes with debootstrap:
#   buildah bud --build-arg BASE_IMAGE=localhost/passhat/base:bookworm -t passhat .
# With Docker and a registry: docker build --build-arg BASE_IMAGE=python:3.11-slim-bookworm .
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# NB: set only where PyPI sits behind a TLS-intercepting proxy (build.sh mounts the CA there).
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/passhat \
    && /opt/passhat/bin/pip install --quiet "setuptools>=68" wheel
WORKDIR /src
# Dependencies first, in their own layer: a source change rebuilds only the layers below.
COPY pyproject.toml ./
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' >/tmp/requirements.txt \
    && /opt/passhat/bin/pip install --quiet -r /tmp/requirements.txt
# NB: .dockerignore lets in only pyproject.toml, README.md and passhat/.
COPY . ./
# NB: pip stays in the virtualenv so trial images built FROM this one can add packages.
RUN /opt/passhat/bin/pip install --quiet --no-deps --no-build-isolation . \
    && /opt/passhat/bin/pip uninstall --quiet --yes setuptools wheel

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="passhat" \
      org.opencontainers.image.description="Kubernetes-native executor for AI-agent consistency evals" \
      org.opencontainers.image.licenses="Apache-2.0"
# 65532: the conventional "nonroot" UID, numeric so runAsNonRoot can verify it. NB: kopf asks
# getpass.getuser() for its identity: a passwd entry for 65532, and USER for any other UID.
RUN echo 'passhat:x:65532:65532:passhat:/tmp:/usr/sbin/nologin' >>/etc/passwd \
    && echo 'passhat:x:65532:' >>/etc/group
COPY --from=build /opt/passhat /opt/passhat
ENV PATH=/opt/passhat/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    USER=passhat \
    HOME=/tmp
WORKDIR /tmp
USER 65532:65532
ENTRYPOINT ["passhat"]
CMD ["--help"]
