"""XLA_FLAGS for tests of multi-device code on the CPU (run in a subprocess: flags bind at backend start)."""

# Four forced CPU devices share two cores with the other test worker, so one device can reach a collective
# well after the others; XLA's CPU rendezvous aborts the process after 40 s by default.
FOUR_CPU_DEVICES = ("--xla_force_host_platform_device_count=4 --xla_cpu_collective_call_terminate_timeout_seconds=180 "
                    "--xla_cpu_collective_timeout_seconds=180")
