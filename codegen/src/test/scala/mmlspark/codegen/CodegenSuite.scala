package mmlspark.codegen

import java.io.File

import mmlspark.core.{ClassScan, Stages}
import org.scalatest.funsuite.AnyFunSuite

class CodegenSuite extends AnyFunSuite {

  private val root = Main.root

  test("the committed generated files equal a fresh generation") {
    val diffs = Main.differences(root)
    assert(diffs.isEmpty, diffs.mkString("run 'make codegen' and commit:\n", "\n", ""))
  }

  test("every public stage gets a wrapper module and a Spark Connect registration") {
    val outputs = Main.outputs(root)
    val registered = outputs
      .collect {
        case (path, text) if path.contains("META-INF/services") =>
          text.linesIterator.filterNot(_.startsWith("#")).toSet
      }
      .flatten
      .toSet
    ClassScan.publicStages.foreach { cls =>
      assert(
        outputs.contains(s"mmlspark/${Stages.area(cls)}/_${cls.getSimpleName}.py"),
        cls.getName
      )
      assert(registered.contains(cls.getName), cls.getName)
    }
  }

  test("Python literals of JVM defaults") {
    assert(PyCodeGen.literal("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"")
    assert(PyCodeGen.literal(Array("x", "y")) == "[\"x\", \"y\"]")
    assert(PyCodeGen.literal(true) == "True")
    assert(PyCodeGen.literal(1.5) == "1.5")
    assert(PyCodeGen.literal(Double.NaN) == "float(\"nan\")")
    assert(PyCodeGen.literal(64L) == "64")
  }

  test("snake_case module names for hand-written subclasses") {
    assert(PyCodeGen.snakeCase("TimerModel") == "timer_model")
    assert(PyCodeGen.snakeCase("ONNXModel") == "onnx_model")
  }

  test("the generated Scala shared params are the ones compiled into the jar") {
    val file = new File(root, "scala/src/main/scala/mmlspark/contracts/SharedParams.scala")
    assert(file.isFile)
    SharedParamsCodeGen.table.foreach(p => Class.forName(s"mmlspark.contracts.${p.traitName}"))
  }
}
