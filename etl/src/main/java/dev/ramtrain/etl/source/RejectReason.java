package dev.ramtrain.etl.source;

/** Why an input was skipped; counted per reason in the manifest and listed in the rejects file. */
public enum RejectReason {
  EMPTY_FILE,
  NOT_AN_IMAGE,
  UNSUPPORTED_FORMAT,
  TRUNCATED,
  UNREADABLE,
  CORRUPT,
  TOO_LARGE,
  BAD_RAW_SHAPE,
  MISSING_LABEL
}
