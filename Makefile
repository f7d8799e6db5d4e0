# spine: the two entry points a newcomer needs are `make demo` and `make test`.
# Both install what is missing first (`make deps`), so they work on a fresh Debian 12.

CARGO ?= cargo
SPINE := target/release/spine
APT_PKGS := clang llvm libbpf-dev bpftool iproute2 libc6-dev
# Binaries (or headers) whose absence means a package must be installed.
NEED := /usr/bin/clang /usr/bin/llvm-objdump /usr/include/bpf/bpf_helpers.h /usr/sbin/bpftool /usr/sbin/ip

.PHONY: deps build demo test lint fmt clean

deps:
	@missing=""; for f in $(NEED); do [ -e $$f ] || missing="$$missing $$f"; done; \
	if [ -n "$$missing" ]; then \
		echo "deps: missing$$missing; installing $(APT_PKGS)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(APT_PKGS) >/dev/null; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "deps: cargo not found; install Rust (rustup) first" >&2; exit 1; }

build: deps
	$(CARGO) build --release -p spine-cli

# The main job on its built-in default: a bundled XDP program over a bundled capture.
demo: build
	$(SPINE) demo

# Every test: unit, conformance, loader robustness, and differential tests against the
# kernel's BPF_PROG_TEST_RUN (these need root; without bpf(2) they skip loudly).
test: deps
	$(CARGO) test --workspace

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
