package dev.ramtrain.jobs.cli;

import java.util.Map;
import picocli.CommandLine.Option;

/** {@code predict}'s and {@code evaluate}'s {@code --offload}: where the weights stay. */
final class OffloadFlag {
  @Option(
      names = "--offload",
      paramLabel = "MODE",
      description =
          "auto (stream the weights from host memory when the model does not fit the device"
              + " beside its activations), on or off (ramtrain.offload.mode).")
  String mode;

  /** The setting the flag gives, or none. */
  Map<String, String> settings() {
    return mode == null ? Map.of() : Map.of("ramtrain.offload.mode", mode);
  }
}
