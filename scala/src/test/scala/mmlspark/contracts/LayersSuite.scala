package mmlspark.contracts

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import scala.jdk.CollectionConverters._

import org.scalatest.funsuite.AnyFunSuite

/** The library's packages form layers: reads the sources and fails on a reference against them. */
class LayersSuite extends AnyFunSuite {

  private val sourceRoot: File =
    Seq("src/main/scala/mmlspark", "scala/src/main/scala/mmlspark")
      .map(new File(_))
      .find(_.isDirectory)
      .getOrElse(fail("the main Scala sources are not below the working directory"))

  /** Package (below `mmlspark`) -> the other `mmlspark` packages its sources name. */
  private lazy val references: Map[String, Set[String]] = {
    val reference = """(?<![\w.])mmlspark\.(\w+)""".r
    sourceRoot
      .listFiles()
      .filter(_.isDirectory)
      .map { dir =>
        val names = Files
          .walk(dir.toPath)
          .iterator()
          .asScala
          .filter(_.toString.endsWith(".scala"))
          .flatMap(p => new String(Files.readAllBytes(p), UTF_8).linesIterator)
          .filterNot(line => line.trim.startsWith("*") || line.trim.startsWith("/"))
          .flatMap(line => reference.findAllMatchIn(line).map(_.group(1)))
          .toSet
        dir.getName -> (names - dir.getName)
      }
      .toMap
  }

  test("the sources are where the test reads them") {
    assert(references.keySet.contains("pixels") && references.keySet.contains("image"))
    assert(references("image").contains("pixels"))
  }

  test("the pixel layer depends on no other area but contracts") {
    assert(references("pixels").subsetOf(Set("contracts")), references("pixels"))
  }

  test("opencv sits on the pixel layer, below image") {
    assert(!references("opencv").contains("image"), references("opencv"))
  }

  test("contracts depend on no area, and no library area depends on an app") {
    assert(references("contracts").isEmpty, references("contracts"))
    references.foreach { case (area, names) =>
      if (area != "apps") assert(!names.contains("apps"), s"$area references apps")
    }
  }

  test("no two areas depend on each other, directly or through others") {
    def reaches(from: String, seen: Set[String]): Set[String] =
      references.getOrElse(from, Set.empty).diff(seen).foldLeft(seen) { (acc, next) =>
        if (acc(next)) acc else reaches(next, acc + next)
      }
    val cyclic = references.keys.filter(area => reaches(area, Set.empty).contains(area))
    assert(cyclic.isEmpty, s"areas in a cycle: ${cyclic.toSeq.sorted.mkString(", ")}")
  }

  test("Spark internals are reached only through org.apache.spark.ml.mmlspark") {
    val internal =
      """org\.apache\.spark\.(internal|unsafe|network|sql\.catalyst|SparkEnv|\{[^}]*SparkEnv)""".r
    val offenders = Files
      .walk(sourceRoot.toPath)
      .iterator()
      .asScala
      .filter(_.toString.endsWith(".scala"))
      .flatMap { p =>
        new String(Files.readAllBytes(p), UTF_8).linesIterator
          .filter(line => internal.findFirstIn(line).nonEmpty)
          .map(line => s"${sourceRoot.toPath.relativize(p)}: ${line.trim}")
      }
      .toList
    assert(offenders.isEmpty, offenders.mkString("\n"))
    // and the scan does see an internal import where one stands
    val quarantine = new File(sourceRoot.getParentFile, "org/apache/spark/ml/mmlspark")
    val seen = new String(
      Files.readAllBytes(new File(quarantine, "SparkInternals.scala").toPath),
      UTF_8
    )
    assert(internal.findFirstIn(seen).nonEmpty)
  }
}
