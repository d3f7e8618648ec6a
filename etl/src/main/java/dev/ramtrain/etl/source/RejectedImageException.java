package dev.ramtrain.etl.source;

/** An input that cannot become a sample; the job records it and goes on. */
public final class RejectedImageException extends Exception {
  private final RejectReason reason;

  public RejectedImageException(RejectReason reason, String detail) {
    super(detail, null, false, false); // thrown per bad file: no stack trace needed
    this.reason = reason;
  }

  public RejectReason reason() {
    return reason;
  }
}
