# The Spacefix gateway as a small image that builds without a registry: no
# base image to pull, only the static binary, the CA certificates and the
# folders it needs. Build it with scripts/docker-build, which compiles the
# binary (CGO off) and gathers this image's context:
#
#   scripts/docker-build spacefix:dev
#   docker run --network host -v spacefix-data:/data spacefix:dev
#
# The gateway listens on 0.0.0.0:8080 and keeps its SQLite store and its
# secret key file in /data (a volume): the listen address and the store come
# from SPACEFIX_ADDR and SPACEFIX_DATA, so `docker run -e` changes them, for
# example SPACEFIX_DATA=postgres://… for several gateways (docs/deployment.md).
FROM scratch

# The numeric user and group the gateway runs as: not root, and numeric so
# Kubernetes' runAsNonRoot can check it without a passwd file.
USER 65532:65532

COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# /data holds the store and secret.key; /tmp is for SQLite's and Go's
# temporary files (Kubernetes mounts an emptyDir there, the root
# filesystem being read-only).
COPY --chown=65532:65532 data /data
COPY --chown=65532:65532 tmp /tmp
COPY spacefix /usr/local/bin/spacefix

ENV SPACEFIX_ADDR=0.0.0.0:8080 \
    SPACEFIX_DATA=/data/spacefix.db \
    TMPDIR=/tmp
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/spacefix"]
CMD ["serve"]
