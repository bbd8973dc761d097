package mmlspark.pixels

import java.net.JarURLConnection
import java.nio.file.{Files, Path}
import java.nio.file.attribute.PosixFilePermissions
import java.util.zip.CRC32

import scala.io.Source

import org.scalatest.funsuite.AnyFunSuite

import mmlspark.onnx.TempFiles

/** OpenCV's library is extracted once per machine and user, and every JVM loads that copy: a JVM
  * killed leaves no copy of its own behind.
  */
class OpenCVLoadSuite extends AnyFunSuite {

  private def crc(file: Path): Long = {
    val sum = new CRC32()
    sum.update(Files.readAllBytes(file))
    sum.getValue
  }

  private def inode(file: Path): AnyRef = Files.getAttribute(file, "unix:ino")

  private val isLinux = sys.props("os.name").toLowerCase.startsWith("linux")

  test("the library is extracted whole once into a folder only its user may write, then reused") {
    assume(isLinux, "the layout of the natives this checks is Linux's")
    val temp = TempFiles.createDir("opencv-load")
    val file = OpenCV.extracted(temp).get
    assert(file.getParent.getFileName.toString == s"mmlspark-opencv-${sys.props("user.name")}")
    val mode = Files.getPosixFilePermissions(file.getParent)
    assert(PosixFilePermissions.toString(mode) == "rwx------")
    // The copy is the jar's entry, by the CRC the jar's directory records for it.
    val entry = getClass.getResource(OpenCV.resourceName.get).openConnection() match {
      case jar: JarURLConnection => jar.getJarEntry
      case other => fail(s"the natives are not in a jar: $other")
    }
    assert(Files.size(file) == entry.getSize)
    assert(crc(file) == entry.getCrc)
    // A second JVM (a second call) finds it and writes nothing.
    val before = inode(file)
    assert(OpenCV.extracted(temp).get == file)
    assert(inode(file) == before)
    assert(Files.list(file.getParent).count() == 1, "a part left behind")
    // A copy cut short (a disk that filled) is replaced whole.
    Files.write(file, Array[Byte](1, 2, 3))
    assert(OpenCV.extracted(temp).get == file)
    assert(crc(file) == entry.getCrc)
  }

  test("a folder of that name that others may write to is not used") {
    assume(isLinux, "the layout of the natives this checks is Linux's")
    val temp = TempFiles.createDir("opencv-load")
    val folder = temp.toPath.resolve(s"mmlspark-opencv-${sys.props("user.name")}")
    Files.createDirectory(folder)
    Files.setPosixFilePermissions(folder, PosixFilePermissions.fromString("rwxrwxrwx"))
    assert(OpenCV.extracted(temp).isEmpty)
    assert(Files.list(folder).count() == 0)
  }

  test("this JVM runs OpenCV from the shared copy, not a copy of its own") {
    assume(isLinux, "reads /proc/self/maps")
    OpenCV.ensureLoaded()
    val source = Source.fromFile("/proc/self/maps")
    val maps =
      try source.getLines().toList
      finally source.close()
    val library = System.mapLibraryName(org.opencv.core.Core.NATIVE_LIBRARY_NAME)
    val mapped = maps.filter(_.endsWith(library)).map(_.split("\\s+").last).distinct
    val shared =
      new java.io.File(sys.props("java.io.tmpdir"), s"mmlspark-opencv-${sys.props("user.name")}")
    assert(mapped.nonEmpty && mapped.forall(_.startsWith(shared.getCanonicalPath)), mapped)
  }
}
