package mmlspark.codegen

import java.io.File

import mmlspark.contracts.StageParam
import mmlspark.core.{ClassScan, Stages}
import org.apache.spark.ml.param.{IntParam, Param, ParamMap, Params}
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

  private def instance(cls: Class[_]): Params =
    cls.getConstructor().newInstance().asInstanceOf[Params]

  test("every shared param of the table is a trait compiled into the jar, as the table says") {
    SharedParams.table.foreach { row =>
      val traitClass = Class.forName(s"${SharedParamsCodeGen.scalaPackage}.${row.traitName}")
      assert(traitClass.isInterface, row.traitName)
      assert(classOf[Params].isAssignableFrom(traitClass), row.traitName)
    }
    // Every param a stage takes from a trait has the table's name, doc and type.
    val used = Stages.all.flatMap { cls =>
      val stage = instance(cls)
      SharedParamsCodeGen.of(cls).map { row =>
        val param = stage.getParam(row.name)
        val getter = cls.getMethod(s"get${row.name.capitalize}")
        assert(param.doc == row.doc, s"${cls.getName}.${row.name}")
        assert(ParamTypes.of(param, getter.getReturnType).contains(row.paramType), row.name)
        row.name
      }
    }.toSet
    assert(Set("inputCol", "tensorChannelOrder", "predictionCol").subsetOf(used))
  }

  test("a stage's shared params are found from the traits it mixes in") {
    val names = (cls: Class[_]) => SharedParamsCodeGen.of(cls).map(_.name)
    // Directly, and through another trait (FindBestModelParams, MetricParams).
    assert(
      names(classOf[mmlspark.opencv.ImageTransformer]) ==
        Seq("inputCol", "outputCol", "errorCol", "reducedDecode", "tensorChannelOrder")
    )
    assert(names(classOf[mmlspark.onnx.ImageFeaturizer]).contains("tensorChannelOrder"))
    assert(names(classOf[mmlspark.onnx.ImageFeaturizer]).contains("reducedDecode"))
    assert(names(classOf[mmlspark.automl.FindBestModel]) == Seq("labelCol", "predictionCol"))
    assert(
      names(classOf[mmlspark.train.ComputeModelStatistics]) == Seq("labelCol", "predictionCol")
    )
    assert(names(classOf[mmlspark.stages.SelectColumns]).isEmpty)
  }

  test("a new row of the table becomes a Scala trait and a Python mixin") {
    val row = SharedParam(
      "sampleRatio",
      ParamType.double,
      "fraction of the rows sampled",
      Some("ParamValidators.inRange(0, 1)")
    )
    val rows = SharedParams.table :+ row
    val scala = SharedParams.scalaSource(rows)
    assert(scala.startsWith(SharedParams.scalaSource()))
    assert(
      scala.endsWith(
        """/** Trait for shared param `sampleRatio`: fraction of the rows sampled. */
          |trait HasSampleRatio extends Params {
          |
          |  /** Param for fraction of the rows sampled. */
          |  final val sampleRatio: DoubleParam =
          |    new DoubleParam(this, "sampleRatio", "fraction of the rows sampled", ParamValidators.inRange(0, 1))
          |
          |  final def getSampleRatio: Double = $(sampleRatio)
          |
          |  def setSampleRatio(value: Double): this.type = set(sampleRatio, value)
          |}
          |""".stripMargin
      )
    )
    val python = SharedParamsCodeGen.pythonSource(rows)
    assert(python.contains("\"HasMiniBatchSize\", \"HasPredictionCol\""))
    assert(python.contains("\"HasTensorChannelOrder\", \"HasSampleRatio\"]"))
    assert(
      python.endsWith(
        s"""class HasSampleRatio(Params):
          |    \"\"\"Mixin for shared param ``sampleRatio``: fraction of the rows sampled.\"\"\"
          |
          |    sampleRatio: "Param[float]" = Param(
          |        Params._dummy(),
          |        "sampleRatio",
          |        "fraction of the rows sampled",
          |        typeConverter=TypeConverters.toFloat,
          |    )
          |
          |    def getSampleRatio(self) -> float:
          |        \"\"\"Gets the value of ``sampleRatio`` or its default.\"\"\"
          |        return self.getOrDefault(self.sampleRatio)
          |
          |    def setSampleRatio(self: _P, value: float) -> _P:
          |        \"\"\"Sets ``sampleRatio``: fraction of the rows sampled.\"\"\"
          |        return self._set(sampleRatio=value)
          |""".stripMargin
      )
    )
  }

  test("param types are keyed by the Param class and the getter's value class") {
    val owner = new TypesOwner
    assert(
      ParamTypes.of(new IntParam(owner, "n", "n"), java.lang.Integer.TYPE).contains(ParamType.int)
    )
    assert(
      ParamTypes.of(new Param[String](owner, "s", "s"), classOf[String]).contains(ParamType.string)
    )
    assert(
      ParamTypes
        .of(new StageParam(owner, "p", "p"), classOf[org.apache.spark.ml.PipelineStage])
        .contains(ParamType.stage)
    )
    // A generic Param of a type Python cannot convert, or a getter of another type, has none.
    assert(ParamTypes.of(new Param[Int](owner, "i", "i"), java.lang.Integer.TYPE).isEmpty)
    assert(ParamTypes.of(new IntParam(owner, "n", "n"), java.lang.Long.TYPE).isEmpty)
    assert(ParamType.all.map(_.scalaType).distinct.size == ParamType.all.size)
  }

  // A typed default in prose: "(default: 224)", "'RGB' (default)", "defaults to 1".
  private val typedDefault = "\\b[Dd]efault(s|ed)?\\b".r

  test("no param doc types its default: the generated docs render the real one") {
    val docs = SharedParams.table.map(p => s"shared param ${p.name}" -> p.doc) ++
      Stages.all.flatMap(cls => instance(cls).params.map(p => s"${cls.getName}.${p.name}" -> p.doc))
    val typed = docs.collect { case (name, doc) if typedDefault.findFirstIn(doc).isDefined => name }
    assert(typed.isEmpty, typed.mkString("param docs that state a default:\n", "\n", ""))
    assert(typedDefault.findFirstIn("height (default: 224, at least 1)").isDefined)
    assert(typedDefault.findFirstIn("'RGB' (default) or 'BGR'").isDefined)
    assert(typedDefault.findFirstIn("'HEURISTIC' or 'DEFAULT'").isEmpty)
  }

  test("each generated docstring states the stage's real default, read from getDefault") {
    val outputs = Main.outputs(root)
    var checked = 0
    Stages.all.foreach { cls =>
      val stage = instance(cls)
      val module = outputs(s"mmlspark/${Stages.area(cls)}/_${cls.getSimpleName}.py")
      stage.params.foreach { p =>
        val entry = s"\n    ${p.name} : "
        val start = module.indexOf(entry)
        assert(start >= 0, s"${cls.getName}.${p.name} is not in the docstring")
        val text = module.substring(start + entry.length).takeWhile(_ != '\n')
        val doc = module.substring(start + entry.length).linesIterator.drop(1).next()
        stage.getDefault(p) match {
          case Some(value) =>
            val expected = s" Default: ``${PyCodeGen.literal(value)}``."
            assert(doc.endsWith(expected), s"${cls.getName}.${p.name}: $doc")
            checked += 1
          case None =>
            assert(!doc.contains("Default:"), s"${cls.getName}.${p.name}: $doc")
        }
        assert(text.endsWith(", optional"), text)
      }
    }
    // Spot checks against values written here, not read from the stages.
    val featurizer = outputs("mmlspark/onnx/_ImageFeaturizer.py")
    assert(featurizer.contains("(at least 1). Default: ``224``."))
    assert(featurizer.contains("Default: ``[0.485, 0.456, 0.406]``."))
    assert(featurizer.contains("'RGB' or 'BGR' (any case). Default: ``\"RGB\"``."))
    assert(checked > 80)
  }
}

/** A Params owner for the param type tests. */
private final class TypesOwner extends Params {
  override val uid: String = "types"
  override def copy(extra: ParamMap): Params = this
}
