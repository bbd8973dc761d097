package mmlspark.pixels

import java.io.File
import java.net.JarURLConnection
import java.nio.file.{Files, LinkOption, Path, StandardCopyOption}
import java.nio.file.attribute.PosixFilePermissions

import scala.util.Try

/** Loads OpenCV's native library once per JVM (driver and every executor), from the natives packed
  * in the `org.openpnp:opencv` jar. Every code path that touches OpenCV calls
  * [[OpenCV.ensureLoaded]] first; after the first call it costs one volatile read.
  *
  * The library is extracted once per machine and user, not once per JVM: into
  * `java.io.tmpdir/mmlspark-opencv-<user>` (a folder only its owner may write), under a name that
  * holds the library's version, size and CRC, where every later JVM of that user loads the same
  * file. `nu.pattern.OpenCV.loadLocally()` extracts a new 65 MB copy for every JVM and deletes it
  * when the JVM exits, so every JVM killed (an executor lost, a driver stopped with SIGKILL) left
  * its copy in the temporary folder. Where the platform's library is not found that way (a platform
  * this layout does not name, classes not in a jar, a folder that is not its owner's alone),
  * `loadLocally()` loads it as before.
  */
object OpenCV {

  private lazy val loaded: Try[Unit] = Try {
    extracted(new File(sys.props("java.io.tmpdir"))) match {
      case Some(file) => System.load(file.toString)
      case None => nu.pattern.OpenCV.loadLocally()
    }
  }

  def ensureLoaded(): Unit =
    loaded.failed.foreach { cause =>
      throw new IllegalStateException(
        s"mmlspark: OpenCV ${org.opencv.core.Core.VERSION} natives could not be loaded on " +
          s"${sys.props("os.name")} ${sys.props("os.arch")} (Java ${sys.props("java.version")}); tried " +
          "the library for this platform from the org.openpnp:opencv jar, extracted into " +
          "java.io.tmpdir. Is the platform one the jar ships natives for, and is java.io.tmpdir " +
          "writable?",
        cause
      )
    }

  /** Where the jar packs the library for this JVM's platform (openpnp's layout), if it packs one.
    */
  private[pixels] def resourceName: Option[String] = {
    val os = sys.props("os.name").toLowerCase
    val arch = sys.props("os.arch") match {
      case "amd64" | "x86_64" => Some("x86_64")
      case "aarch64" | "arm64" => Some("ARMv8")
      case _ => None
    }
    val folder =
      if (os.startsWith("linux")) Some("linux")
      else if (os.startsWith("mac")) Some("osx")
      else None
    for (f <- folder; a <- arch)
      yield s"/nu/pattern/opencv/$f/$a/${System.mapLibraryName(org.opencv.core.Core.NATIVE_LIBRARY_NAME)}"
  }

  /** The library for this platform extracted under `temp` (once: a file already there is used as it
    * is), or None where it cannot be found or the folder is not this user's alone.
    */
  private[pixels] def extracted(temp: File): Option[Path] =
    for {
      name <- resourceName
      url <- Option(getClass.getResource(name))
      entry <- url.openConnection() match {
        case jar: JarURLConnection => Option(jar.getJarEntry)
        case _ => None
      }
      folder <- ownFolder(temp.toPath.resolve(s"mmlspark-opencv-${sys.props("user.name")}"))
    } yield {
      val file = folder.resolve(
        f"${org.opencv.core.Core.VERSION}-${entry.getSize}-${entry.getCrc}%08x-${name.split('/').last}"
      )
      if (
        !Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS) || Files.size(file) != entry.getSize
      ) {
        // A copy of its own for each JVM that gets here, renamed into place whole: a JVM that
        // loads the file meanwhile maps the old one or the new one, never a part.
        val part = Files.createTempFile(folder, "extracting-", ".part")
        try {
          val in = url.openStream()
          try Files.copy(in, part, StandardCopyOption.REPLACE_EXISTING)
          finally in.close()
          Files.move(
            part,
            file,
            StandardCopyOption.ATOMIC_MOVE,
            StandardCopyOption.REPLACE_EXISTING
          )
        } finally Files.deleteIfExists(part)
      }
      file
    }

  /** `folder`, made if missing, where it is a directory (not a link) that this user owns and only
    * they may write to; None otherwise.
    */
  private def ownFolder(folder: Path): Option[Path] = Try {
    if (!Files.exists(folder, LinkOption.NOFOLLOW_LINKS)) {
      Try(
        Files.createDirectory(
          folder,
          PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"))
        )
      )
    }
    val own = Files.isDirectory(folder, LinkOption.NOFOLLOW_LINKS) &&
      Files.getOwner(folder, LinkOption.NOFOLLOW_LINKS).getName == sys.props("user.name") &&
      PosixFilePermissions.toString(
        Files.getPosixFilePermissions(folder, LinkOption.NOFOLLOW_LINKS)
      ) == "rwx------"
    if (own) Some(folder) else None
  }.toOption.flatten
}
