# Airlock build. `make` builds into build/; `make test` runs every suite.
# SANITIZER=address|undefined builds into build-<sanitizer>/ and the same
# `make test` runs against it.

SANITIZER ?=
BUILD ?= build$(if $(SANITIZER),-$(SANITIZER))
CC ?= cc
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 45

PKGS := hiredis libevent msgpack libseccomp libcurl libcrypto jansson yaml-0.1 libvirt libxml-2.0
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS)) -I/usr/include/hiredis
# TLS on the event loop (the gateway's listener, the egress proxy's https):
# in every link, since the worker's objects go into the tests' too
TLS_LIBS := $(shell pkg-config --libs libevent_openssl openssl)
PKG_LIBS := $(shell pkg-config --libs $(PKGS)) $(TLS_LIBS)

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
	-Wwrite-strings -Werror
OPT := -O2 -g
HARDEN := -fPIE -D_FORTIFY_SOURCE=2 -fstack-protector-strong
ifneq ($(SANITIZER),)
OPT := -O1 -g -fno-omit-frame-pointer
HARDEN := -fPIE -fsanitize=$(SANITIZER) -fno-sanitize-recover=all
endif
FINAL_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) $(OPT) $(HARDEN) -MMD -MP $(PKG_CFLAGS) $(CFLAGS)
FINAL_LDFLAGS := -pie -Wl,-z,noexecstack -Wl,-z,relro -Wl,-z,now $(if $(SANITIZER),-fsanitize=$(SANITIZER)) $(LDFLAGS)

PROTO_SRC := $(wildcard proto/*.c)
# The layers, one way: proto/ (codecs, the Redis contract; no I/O) <-
# common/ (connection layer, clocks, log, policy, options) <- client/ (the
# client library) and backends/ <- worker/, scheduler/, gateway/, cli/.
# libairlock is the three lower folders whole.
CLIENT_LIB_SRC := $(wildcard client/*.c)
COMMON_SRC := $(wildcard common/*.c)
LIB_SRC := $(PROTO_SRC) $(COMMON_SRC) $(CLIENT_LIB_SRC)
CLI_SRC := $(wildcard cli/*.c)
# backends/: the interface and the building blocks at the top, one folder
# per boundary (its helper programs beside it, built on their own below).
# Each folder's files whole, but for its helper programs (HELPER_SRC):
# the guest agent's own files are AGENT_ONLY_SRC.
AGENT_ONLY_SRC := $(addprefix backends/microvm/,agent.c warm.c step.c boot.c)
HELPER_SRC := backends/process/init.c backends/container/shim.c backends/container/exec.c \
	backends/container/relay.c \
	backends/microvm/egress_fwd.c $(AGENT_ONLY_SRC)
BACKEND_SRC := $(wildcard backends/*.c) $(filter-out $(HELPER_SRC),$(wildcard backends/*/*.c))
# the session server (worker/session_server.py) goes into the worker as a
# C string, made at build time
WORKER_GEN := $(BUILD)/gen/session_server.c
WORKER_SRC := $(wildcard worker/*.c) $(BACKEND_SRC) $(WORKER_GEN)
# the scheduler ends service-VM leases: the libvirt host module is shared
SCHED_SRC := $(wildcard scheduler/*.c) backends/vm/lvhost.c
GATEWAY_SRC := $(wildcard gateway/*.c)
# the egress proxy and the CA it ends https with (the worker's; the egress benchmark's tool)
PROXY_SRC := $(wildcard worker/proxy*.c) worker/egress_ca.c
TEST_SRC := $(wildcard tests/unit/test_*.c)
# The client library's installed headers, in their folders (they include
# each other as "../proto/x.h"); the daemons' connection layer is not part of it.
HEADERS := $(wildcard proto/*.h) $(filter-out client/client_int.h,$(wildcard client/*.h)) common/log.h common/clock.h

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB := $(BUILD)/libairlock.a
BINS := $(BUILD)/airlock $(BUILD)/airlock-worker $(BUILD)/airlock-scheduler $(BUILD)/airlock-agent \
	$(BUILD)/airlock-sandbox-init $(BUILD)/airlock-oci-shim $(BUILD)/airlock-exec \
	$(BUILD)/airlock-egress-fwd $(BUILD)/airlock-gateway $(BUILD)/airlock-inputs
TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC)) $(BUILD)/tests/proto_tool \
	$(BUILD)/tests/bench_backend $(BUILD)/tests/bench_queue $(BUILD)/tests/egress_tool \
	$(BUILD)/tests/clockshim.so
FUZZERS := $(BUILD)/fuzz/fuzz_job $(BUILD)/fuzz/fuzz_result $(BUILD)/fuzz/fuzz_call \
	$(BUILD)/fuzz/fuzz_junit

.PHONY: all deps test check fuzz format clean headers demo bench images images-early microvm-image \
	install
.SECONDARY:
all: $(LIB) $(BINS) headers

deps:
	bash deploy/install-deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_CFLAGS) -c $< -o $@

$(LIB): $(call obj,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

headers: $(LIB)
	@rm -rf $(BUILD)/include/airlock
	@mkdir -p $(BUILD)/include/airlock/proto $(BUILD)/include/airlock/client $(BUILD)/include/airlock/common
	@for h in $(HEADERS); do cp $$h $(BUILD)/include/airlock/$$h; done

$(BUILD)/airlock: $(call obj,$(CLI_SRC)) $(LIB)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# $@: the text of $< as a C string named $(1)
define text_as_c
	@mkdir -p $(dir $@)
	{ echo '/* made from $< by the Makefile: do not edit */'; \
	  echo 'extern const char $(1)[];'; \
	  echo 'const char $(1)[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } > $@
endef

$(WORKER_GEN): worker/session_server.py
	$(call text_as_c,wk_session_server_py)

$(BUILD)/airlock-worker: $(call obj,$(WORKER_SRC)) $(LIB)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/airlock-scheduler: $(call obj,$(SCHED_SRC)) $(LIB)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/airlock-gateway: $(call obj,$(GATEWAY_SRC)) $(LIB)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The worker's input fetcher (one per job with inputs): URLs through the
# tier's egress rules into the host's cache, archives into an inputs pack.
$(BUILD)/airlock-inputs: $(call obj,worker/inputs/main.c worker/inputs/fetcher.c \
		worker/inputs/git.c backends/inpack.c) $(LIB)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(shell pkg-config --libs libarchive)

# The process backend's sandbox init: static and small (it is PID 1 of every
# process sandbox; a copy of the worker's address space would make forking
# the job and tearing the sandbox down slow), never sanitized.
$(BUILD)/airlock-sandbox-init: backends/process/init.c backends/process/init.h backends/jobspec.h backends/jobexec.h \
	backends/jobfs_layout.h backends/hostroot.h backends/newroot.c backends/newroot.h backends/fdpass.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -static -s -o $@ backends/process/init.c \
		backends/newroot.c

# The container backend's per-job shim: static and small too (started for
# every container job), never sanitized.
SHIM_SRC := backends/container/shim.c backends/cgroup.c proto/buf.c proto/err.c
$(BUILD)/airlock-oci-shim: $(SHIM_SRC) backends/cgroup.h backends/fdpass.h proto/buf.h proto/err.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -static -s -o $@ $(SHIM_SRC)

# The first program of every container job (run from the host through a
# descriptor): static and small.
EXEC_SRC := backends/container/exec.c backends/container/relay.c
$(BUILD)/airlock-exec: $(EXEC_SRC) backends/container/relay.h backends/container/ctr.h \
		      backends/jobexec.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -static -s -o $@ $(EXEC_SRC)

# A microVM's way to the egress proxy (started by the VMM in its jail for
# each guest connection): static and small.
$(BUILD)/airlock-egress-fwd: backends/microvm/egress_fwd.c backends/microvm/egress_fwd.h backends/fdpass.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -static -s -o $@ backends/microvm/egress_fwd.c

# The microVM guest agent: static (the guest has no libraries of its own),
# never sanitized (it is PID 1 of a VM), stripped so that its bytes, and so
# the image hash, depend only on the sources.
AGENT_SRC := $(AGENT_ONLY_SRC) backends/vmchan.c backends/cgroup.c backends/jobfs.c backends/inpack.c common/clock.c \
	backends/jobspec.c backends/endstatus.c backends/seccomp.c common/log.c proto/buf.c proto/err.c \
	proto/job.c proto/field.c proto/inputs.c proto/mp.c proto/result.c proto/grade.c backends/judge.c
# the session server's text too, which a warm interpreter compiles ahead
AGENT_GEN := $(BUILD)/gen/agent_server.c
$(AGENT_GEN): worker/session_server.py
	$(call text_as_c,agent_session_server_py)
$(BUILD)/airlock-agent: $(AGENT_SRC) $(AGENT_GEN) $(wildcard backends/*.h backends/microvm/*.h proto/*.h common/*.h)
	$(CC) -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -static -s -ffile-prefix-map=$(CURDIR)=. \
		-o $@ $(AGENT_SRC) $(AGENT_GEN) -lmsgpackc -lseccomp

$(BUILD)/tests/%: $(call obj,tests/unit/%.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The grading comparison is worker and agent code (backends/judge.c).
$(BUILD)/tests/test_grade: $(call obj,tests/unit/test_grade.c backends/judge.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The inputs pack is backends' (backends/inpack.c).
$(BUILD)/tests/test_inpack: $(call obj,tests/unit/test_inpack.c backends/inpack.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The JUnit report scanner is the CLI's (cli/junit.c).
$(BUILD)/tests/test_junit: $(call obj,tests/unit/test_junit.c cli/junit.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The microVM channel's framing is worker code (backends/vmchan.c).
$(BUILD)/tests/test_vmchan: $(call obj,tests/unit/test_vmchan.c backends/vmchan.c backends/jobspec.c backends/judge.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# Admission against canned Redis replies: the scheduler's admission.c with
# its connection and result writers faked in the test.
$(BUILD)/tests/test_admission: $(call obj,tests/unit/test_admission.c scheduler/admission.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The worker's taking of jobs against canned replies: fetch.c with its
# connection and job paths faked in the test.
$(BUILD)/tests/test_fetch: $(call obj,tests/unit/test_fetch.c worker/fetch.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The worker's commit queue against canned replies: commit.c with its
# connection and webhooks faked in the test.
$(BUILD)/tests/test_commit: $(call obj,tests/unit/test_commit.c worker/commit.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The service VM's domain XML is worker code (backends/vm/domxml.c).
$(BUILD)/tests/test_domxml: $(call obj,tests/unit/test_domxml.c backends/vm/domxml.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

WORKER_LIB_OBJ := $(call obj,$(filter-out worker/main.c,$(WORKER_SRC)))

$(BUILD)/tests/proto_tool: $(call obj,tests/interop/proto_tool.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/tests/bench_backend: $(call obj,tests/bench/bench_backend.c) $(WORKER_LIB_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/tests/bench_queue: $(call obj,tests/bench/bench_queue.c) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# A fault injector: LD_PRELOAD it to step one process's wall clock (tests/lib/clockshim.c).
$(BUILD)/tests/clockshim.so: tests/lib/clockshim.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -O2 -fPIC -shared -o $@ $< -ldl

$(BUILD)/tests/egress_tool: $(call obj,tests/bench/egress_tool.c $(PROXY_SRC)) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(FINAL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# Fuzz targets: always clang, libFuzzer + ASan + UBSan, separate from $(BUILD).
FUZZ_FLAGS := -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	$(shell pkg-config --cflags msgpack jansson hiredis)
$(BUILD)/fuzz/%: tests/fuzz/%.c $(PROTO_SRC) $(wildcard proto/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(PROTO_SRC) $(shell pkg-config --libs msgpack libcrypto jansson)

# the CLI's report scanner: no proto/ in it
$(BUILD)/fuzz/fuzz_junit: tests/fuzz/fuzz_junit.c cli/junit.c cli/junit.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -D_GNU_SOURCE -o $@ $< cli/junit.c

fuzz: $(FUZZERS)

# The image catalogue starts building in the background (as root: about
# ten minutes on a fresh machine) before the programs do; tests/run.sh
# waits for it.
images-early:
	@bash tests/lib/images_bg.sh start $(BUILD)/images.bg

test: images-early all $(TESTS) $(FUZZERS)
	BUILD=$(BUILD) IMAGES_BG=$(BUILD)/images.bg FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/run.sh

# The quick gate: format, unit tests, every header alone, 5 s of fuzzing
# each; no root, no daemon, no image (under a minute).
check: all $(TESTS) $(FUZZERS)
	BUILD=$(BUILD) FUZZ_SECONDS=5 QUICK=1 bash tests/run.sh

demo: all
	BUILD=$(BUILD) bash deploy/demo.sh

# The programs, deploy/systemd/'s units and the example settings under
# $(DESTDIR)$(PREFIX) (default /usr/local; the units name $(PREFIX)/bin)
PREFIX ?= /usr/local
install: all
	BUILD=$(BUILD) PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) bash deploy/install.sh

# The image catalogue from Debian packages (root), one per deploy/images/recipes/NAME:
# /var/lib/airlock/images/NAME (a root directory) and NAME.ext4 (the same, for VMs)
images:
	bash deploy/images/build.sh $(if $(IMAGES),--out $(IMAGES)) all

# The microVM guest (kernel + initramfs with the agent): /var/lib/airlock/images/microvm
microvm-image: $(BUILD)/airlock-agent
	bash deploy/images/build.sh $(if $(IMAGES),--out $(IMAGES)) --agent $(BUILD)/airlock-agent microvm

bench: all $(TESTS)
	BUILD=$(BUILD) bash tests/bench/run.sh

# One major version of clang-format (another formats some lines otherwise).
CLANG_FORMAT ?= clang-format-14
format:
	$(CLANG_FORMAT) -i $(shell git ls-files '*.c' '*.h')

clean:
	rm -rf build build-address build-undefined

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
