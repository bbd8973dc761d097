package mmlspark.pixels

import scala.util.Try

/** Loads OpenCV's native library once per JVM (driver and every executor), from the natives packed
  * in the `org.openpnp:opencv` jar. Every code path that touches OpenCV calls
  * [[OpenCV.ensureLoaded]] first; after the first call it costs one volatile read.
  */
object OpenCV {

  private lazy val loaded: Try[Unit] = Try(nu.pattern.OpenCV.loadLocally())

  def ensureLoaded(): Unit =
    loaded.failed.foreach { cause =>
      throw new IllegalStateException(
        s"mmlspark: OpenCV ${org.opencv.core.Core.VERSION} natives could not be loaded on " +
          s"${sys.props("os.name")} ${sys.props("os.arch")} (Java ${sys.props("java.version")}); tried " +
          "nu.pattern.OpenCV.loadLocally(), which extracts the library for this platform from the " +
          "org.openpnp:opencv jar into java.io.tmpdir. Is the platform one the jar ships natives for, " +
          "and is java.io.tmpdir writable?",
        cause
      )
    }
}
