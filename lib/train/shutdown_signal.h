#pragma once
// SIGINT/SIGTERM during training: the handler only records the signal; the training loop notices it after the
// current update, writes checkpoint_last.pt and returns, so an interrupted run can be resumed with --resume.
// A second signal of the same kind terminates immediately (the default action), for a user who really means it.
namespace parla::train {

// Installs the handlers (idempotent).
void install_shutdown_handlers();
// The signal number received since installation (0 if none).
int shutdown_requested();
// Forgets a received signal (tests).
void reset_shutdown();

}  // namespace parla::train
